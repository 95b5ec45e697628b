package pki

import (
	"crypto/tls"
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

// SaveRenewed replaces the node's certificate and key in dir so that a
// crash leaves one whole pair: both are written beside the old ones
// first, then the key and the certificate are renamed in place;
// LoadNodeFiles finishes a replacement a crash cut short.
func SaveRenewed(dir string, certPEM, keyPEM []byte) error {
	for _, w := range []struct {
		name string
		data []byte
	}{{NodeKeyFile, keyPEM}, {NodeCertFile, certPEM}} {
		if err := writeSynced(filepath.Join(dir, w.name+newSuffix), w.data); err != nil {
			return fmt.Errorf("writing the renewed %s: %w", w.name, err)
		}
	}
	return finishRenewal(dir)
}

const newSuffix = ".new"

// finishRenewal renames a renewed pair in place: the key first, then the
// certificate. A pair found half renamed (the new key in place, the new
// certificate beside it) is completed.
func finishRenewal(dir string) error {
	for _, name := range []string{NodeKeyFile, NodeCertFile} {
		p := filepath.Join(dir, name)
		if err := os.Rename(p+newSuffix, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("renewing %s: %w", name, err)
		}
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// recoverRenewal finishes or drops a renewal a crash cut short: a whole
// new pair (or a new certificate matching the key already renamed) goes
// in place; anything less was never renamed and is removed.
func recoverRenewal(dir string) error {
	crtNew, keyNew := filepath.Join(dir, NodeCertFile+newSuffix), filepath.Join(dir, NodeKeyFile+newSuffix)
	crt, errC := os.ReadFile(crtNew)
	key, errK := os.ReadFile(keyNew)
	if errors.Is(errC, fs.ErrNotExist) && errors.Is(errK, fs.ErrNotExist) {
		return nil
	}
	if errC == nil && errK == nil {
		if _, err := tls.X509KeyPair(crt, key); err == nil {
			return finishRenewal(dir)
		}
	}
	if errC == nil && errors.Is(errK, fs.ErrNotExist) {
		if cur, err := os.ReadFile(filepath.Join(dir, NodeKeyFile)); err == nil {
			if _, err := tls.X509KeyPair(crt, cur); err == nil {
				return finishRenewal(dir)
			}
		}
	}
	for _, p := range []string{crtNew, keyNew} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// writeSynced writes a file (mode 0600) and flushes it to disk.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ErrNoPKI: the node has no certificate yet (it belongs to no cluster).
var ErrNoPKI = errors.New("no certificates yet")

// LoadNodeFiles reads <data-dir>/pki; ErrNoPKI when the node has none.
func LoadNodeFiles(dir string) (*NodeFiles, error) {
	if err := recoverRenewal(dir); err != nil {
		return nil, err
	}
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
