package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/legionbsd/legion"
)

// readManifests reads and admits the objects of a file, of every .yaml,
// .yml and .json file under a directory (in name order), or of standard
// input for "-". It returns every object that passed and an error naming
// each that did not.
func readManifests(stdin io.Reader, arg, ns string) ([]legion.Object, error) {
	if arg == "-" {
		data, err := readLimited(stdin, "standard input")
		if err != nil {
			return nil, err
		}
		return legion.ParseManifestIn("-", data, ns)
	}
	info, err := os.Stat(arg)
	if err != nil {
		return nil, err
	}
	files := []string{arg}
	if info.IsDir() {
		files = nil
		err := filepath.WalkDir(arg, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && p != arg && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			switch strings.ToLower(filepath.Ext(p)) {
			case ".yaml", ".yml", ".json":
				if !d.IsDir() {
					files = append(files, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("%s: no .yaml, .yml or .json files", arg)
		}
	}
	var all []legion.Object
	var errs []error
	for _, f := range files {
		data, err := readManifestFile(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs, err := legion.ParseManifestIn(f, data, ns)
		all = append(all, objs...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	return all, errors.Join(errs...)
}

// readManifestFile reads a manifest file of at most legion.MaxManifestSize
// bytes; a larger one is refused by its size, unread.
func readManifestFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > legion.MaxManifestSize {
		return nil, fmt.Errorf("%s: %d bytes, at most %d (%d MiB) allowed in a manifest", name, info.Size(), legion.MaxManifestSize, legion.MaxManifestSize>>20)
	}
	return readLimited(f, name)
}

// readLimited reads r to its end, or refuses it once it has given more
// than legion.MaxManifestSize bytes: a pipe or device has no size to check
// first.
func readLimited(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, legion.MaxManifestSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > legion.MaxManifestSize {
		return nil, fmt.Errorf("%s: more than %d bytes, at most %d (%d MiB) allowed in a manifest", name, legion.MaxManifestSize, legion.MaxManifestSize, legion.MaxManifestSize>>20)
	}
	return data, nil
}
