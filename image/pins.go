package image

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Pin keeps layers from garbage collection while unfinished work uses
// them: a file under <data-dir>/images/pins naming them, held locked by
// the process that made it. A pin whose process died is unlocked, and the
// next collection drops it.
type Pin struct {
	f    *os.File
	path string
}

type pinFile struct {
	Layers []string `json:"layers"`
}

// pin writes and locks a pin file naming chain ids.
func pinLayers(dir string, chainIDs []string) (*Pin, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	// Written under another name and renamed when complete, so a reader
	// never sees a half-written pin; the lock stays with the open file.
	f, err := os.CreateTemp(dir, ".new-pin-*.json")
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("lock pin: %w", err)
	}
	b, _ := json.Marshal(pinFile{Layers: chainIDs})
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	final := filepath.Join(dir, strings.TrimPrefix(filepath.Base(f.Name()), ".new-"))
	if err := os.Rename(f.Name(), final); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &Pin{f: f, path: final}, nil
}

// Release drops the pin.
func (p *Pin) Release() error {
	if p == nil || p.f == nil {
		return nil
	}
	err := os.Remove(p.path)
	p.f.Close()
	p.f = nil
	return err
}

// pinnedLayers reads the live pins; a pin file nobody holds locked is
// removed.
func pinnedLayers(dir string) (map[string]bool, error) {
	out := map[string]bool{}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "pin-") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		lerr := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
		if lerr == nil {
			// Its holder is gone.
			os.Remove(p)
			f.Close()
			continue
		}
		var pf pinFile
		err = json.NewDecoder(f).Decode(&pf)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("pin %s: %w", p, err)
		}
		for _, l := range pf.Layers {
			out[l] = true
		}
	}
	return out, nil
}
