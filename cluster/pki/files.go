package pki

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The files of <data-dir>/pki.
const (
	CACertFile   = "ca.crt"
	CAKeyFile    = "ca.key" // managers only
	NodeCertFile = "node.crt"
	NodeKeyFile  = "node.key"
)

// NodeFiles is what a node keeps in <data-dir>/pki.
type NodeFiles struct {
	CACert, CAKey, Cert, Key []byte // PEM; CAKey empty on workers
}

// Save writes the files (keys mode 0600).
func (f *NodeFiles) Save(dir string) error {
	write := []struct {
		name string
		data []byte
	}{{CACertFile, f.CACert}, {CAKeyFile, f.CAKey}, {NodeCertFile, f.Cert}, {NodeKeyFile, f.Key}}
	for _, w := range write {
		if len(w.data) == 0 {
			continue
		}
		if err := WriteFile(filepath.Join(dir, w.name), w.data); err != nil {
			return fmt.Errorf("writing %s: %w", w.name, err)
		}
	}
	return nil
}

// ErrNoPKI: the node has no certificate yet (it belongs to no cluster).
var ErrNoPKI = errors.New("no certificates yet")

// LoadNodeFiles reads <data-dir>/pki; ErrNoPKI when the node has none.
func LoadNodeFiles(dir string) (*NodeFiles, error) {
	var f NodeFiles
	read := []struct {
		name string
		dst  *[]byte
		opt  bool
	}{{CACertFile, &f.CACert, false}, {CAKeyFile, &f.CAKey, true}, {NodeCertFile, &f.Cert, false}, {NodeKeyFile, &f.Key, false}}
	for _, r := range read {
		data, err := os.ReadFile(filepath.Join(dir, r.name))
		if errors.Is(err, fs.ErrNotExist) {
			if r.opt {
				continue
			}
			return nil, ErrNoPKI
		}
		if err != nil {
			return nil, err
		}
		*r.dst = data
	}
	return &f, nil
}

// Credentials assembles the node's TLS credentials.
func (f *NodeFiles) Credentials() (*Credentials, error) {
	return NewCredentials(f.Cert, f.Key, f.CACert)
}

// CA returns the CA (with its key when the node holds it).
func (f *NodeFiles) CA() (*CA, error) { return ParseCA(f.CACert, f.CAKey) }
