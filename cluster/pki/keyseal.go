package pki

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/chacha20poly1305"
)

// Autolock: a manager's private keys sealed under an unlock key the
// operator holds. Each key file <name> is kept either in the clear or as
// <name>.sealed; a change of form (reseal) goes through files written
// aside and a marker, so a crash leaves one form of every key.

const (
	// UnlockPrefix begins an unlock key's text form.
	UnlockPrefix = "LGN-UNLOCK-"
	// SealedSuffix names a key file's sealed form.
	SealedSuffix = ".sealed"
	// ResealMarker, in the pki directory, names the form a reseal under
	// way writes, and the keys it concerns.
	ResealMarker = "reseal"
	resealSuffix = ".reseal"
	sealMagic    = "LGNSEAL1"
	fpLen        = 8 // bytes of an unlock key's fingerprint in a sealed file
)

// ErrWrongUnlockKey: a sealed key does not open with the key given.
var ErrWrongUnlockKey = errors.New("the unlock key does not open this sealed key")

// ErrLocked: a key is sealed and no unlock key was given.
var ErrLocked = errors.New("keys are sealed: an unlock key is needed")

var unlockEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// UnlockKey is a 256-bit autolock key.
type UnlockKey [chacha20poly1305.KeySize]byte

// NewUnlockKey makes a random unlock key.
func NewUnlockKey() (UnlockKey, error) {
	var k UnlockKey
	_, err := rand.Read(k[:])
	return k, err
}

// String is the key's text form, LGN-UNLOCK-<base32>.
func (k UnlockKey) String() string { return UnlockPrefix + unlockEncoding.EncodeToString(k[:]) }

// Fingerprint names the key without revealing it (hex of a hash).
func (k UnlockKey) Fingerprint() string { return hex.EncodeToString(k.fp()) }

func (k UnlockKey) fp() []byte {
	h := sha256.Sum256(append([]byte("legion autolock fingerprint\x00"), k[:]...))
	return h[:fpLen]
}

// ParseUnlockKey reads an unlock key's text form (surrounding space is
// ignored).
func ParseUnlockKey(s string) (UnlockKey, error) {
	var k UnlockKey
	s = strings.TrimSpace(s)
	body, ok := strings.CutPrefix(s, UnlockPrefix)
	if !ok {
		return k, fmt.Errorf("unlock key: expected %s<key>", UnlockPrefix)
	}
	b, err := unlockEncoding.DecodeString(body)
	if err != nil {
		return k, fmt.Errorf("unlock key: not base32: %w", err)
	}
	if len(b) != len(k) {
		return k, fmt.Errorf("unlock key: %d bytes, want %d", len(b), len(k))
	}
	copy(k[:], b)
	return k, nil
}

// LockedCommonName names the certificate a locked manager presents: it
// holds no key of its cluster, so callers that check the cluster's CA
// can only be told why the handshake fails.
const LockedCommonName = "legion manager locked: run legion unlock on its host"

// ErrManagerLocked: the server reached is a locked manager.
var ErrManagerLocked = errors.New("this manager is locked: run legion unlock on its host")

// LockedCertificate is a throwaway self-signed certificate naming the
// lock, for a locked manager to serve Unlock with.
func LockedCertificate(now time.Time) (tls.Certificate, error) {
	key, err := NewKey()
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: LockedCommonName, Organization: []string{Organization}},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(CALifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("making the locked manager's certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// SealKey seals a key file's contents under k, bound to the file's name
// (associated data), so a sealed file renamed does not open.
func SealKey(k UnlockKey, name string, clear []byte) ([]byte, error) {
	aead, err := chacha20poly1305.New(k[:])
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(sealMagic)+fpLen+aead.NonceSize()+len(clear)+aead.Overhead())
	out = append(out, sealMagic...)
	out = append(out, k.fp()...)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, clear, []byte(name)), nil
}

// OpenKey opens what SealKey made for the same name.
func OpenKey(k UnlockKey, name string, sealed []byte) ([]byte, error) {
	aead, err := chacha20poly1305.New(k[:])
	if err != nil {
		return nil, err
	}
	hdr := len(sealMagic) + fpLen
	if len(sealed) < hdr+aead.NonceSize()+aead.Overhead() || string(sealed[:len(sealMagic)]) != sealMagic {
		return nil, fmt.Errorf("sealed key %s: not a sealed key file", name)
	}
	nonce := sealed[hdr : hdr+aead.NonceSize()]
	clear, err := aead.Open(nil, nonce, sealed[hdr+aead.NonceSize():], []byte(name))
	if err != nil {
		return nil, fmt.Errorf("sealed key %s (sealed under key %x): %w", name, sealed[len(sealMagic):hdr], ErrWrongUnlockKey)
	}
	return clear, nil
}

// SealedUnder is the fingerprint of the unlock key a sealed file was
// sealed under, read from its header.
func SealedUnder(sealed []byte) (string, bool) {
	if len(sealed) < len(sealMagic)+fpLen || string(sealed[:len(sealMagic)]) != sealMagic {
		return "", false
	}
	return hex.EncodeToString(sealed[len(sealMagic) : len(sealMagic)+fpLen]), true
}

// KeyForm is how one key file is kept in a directory.
type KeyForm struct {
	Clear  bool   // <name> exists
	Sealed string // fingerprint of the unlock key of <name>.sealed; "" if none
}

// FormOf reads how the key file name is kept in dir.
func FormOf(dir, name string) (KeyForm, error) {
	var f KeyForm
	if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
		f.Clear = true
	} else if !errors.Is(err, fs.ErrNotExist) {
		return f, err
	}
	data, err := os.ReadFile(filepath.Join(dir, name+SealedSuffix))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return f, err
	default:
		fp, ok := SealedUnder(data)
		if !ok {
			return f, fmt.Errorf("%s%s: not a sealed key file", name, SealedSuffix)
		}
		f.Sealed = fp
	}
	return f, nil
}

// AnySealed says whether any of the key files is kept sealed only (a
// manager that starts so is locked).
func AnySealed(dir string, names []string) (bool, error) {
	for _, n := range names {
		f, err := FormOf(dir, n)
		if err != nil {
			return false, err
		}
		if f.Sealed != "" && !f.Clear {
			return true, nil
		}
	}
	return false, nil
}

// ReadKeys reads the key files of names found in dir, opening sealed ones
// with k (ErrLocked when one is sealed and k is nil). A key in the clear
// wins over its sealed form: only a certificate renewal writes one beside
// a sealed key, and it is the newer. Keys in neither form are left out.
func ReadKeys(dir string, names []string, k *UnlockKey) (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err == nil {
			out[n] = data
			continue
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		sealed, err := os.ReadFile(filepath.Join(dir, n+SealedSuffix))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if k == nil {
			return nil, fmt.Errorf("%s: %w", n, ErrLocked)
		}
		if out[n], err = OpenKey(*k, n, sealed); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LoadNodeFilesWith is LoadNodeFiles for a node whose keys may be
// sealed: a key missing in the clear is taken from keys (those opened
// with the unlock key).
func LoadNodeFilesWith(dir string, keys map[string][]byte) (*NodeFiles, error) {
	if err := recoverRenewal(dir); err != nil {
		return nil, err
	}
	var f NodeFiles
	for _, r := range []struct {
		name string
		dst  *[]byte
		key  bool
	}{{CACertFile, &f.CACert, false}, {CAKeyFile, &f.CAKey, true}, {NodeCertFile, &f.Cert, false}, {NodeKeyFile, &f.Key, true}} {
		data, err := os.ReadFile(filepath.Join(dir, r.name))
		if errors.Is(err, fs.ErrNotExist) && r.key && keys[r.name] != nil {
			data, err = keys[r.name], nil
		}
		switch {
		case errors.Is(err, fs.ErrNotExist) && r.name == CAKeyFile:
			continue
		case errors.Is(err, fs.ErrNotExist):
			return nil, ErrNoPKI
		case err != nil:
			return nil, err
		}
		*r.dst = data
	}
	return &f, nil
}

// resealStep names a point of a reseal, for tests that stop there as a
// crash would.
type resealStep string

// errStopped: a test stopped the reseal at a step.
var errStopped = errors.New("reseal stopped")

// Reseal writes keys (file name to contents in the clear) into dir in one
// form: sealed under to, or in the clear when to is nil. Every key's new
// form is written aside first; a failure then removes those and leaves
// everything as it was. Then the marker, then the renames and removals,
// which FinishReseal carries through after a crash.
func Reseal(dir string, keys map[string][]byte, to *UnlockKey) error {
	return reseal(dir, keys, to, nil)
}

func reseal(dir string, keys map[string][]byte, to *UnlockKey, stop func(resealStep) bool) error {
	at := func(s resealStep) error {
		if stop != nil && stop(s) {
			return errStopped
		}
		return nil
	}
	names := make([]string, 0, len(keys))
	for n := range keys {
		names = append(names, n)
	}
	slices.Sort(names)
	aside := func() {
		for _, n := range names {
			os.Remove(filepath.Join(dir, n+resealSuffix))
		}
	}
	for _, n := range names {
		data := keys[n]
		if to != nil {
			var err error
			if data, err = SealKey(*to, n, keys[n]); err != nil {
				aside()
				return err
			}
		}
		if err := writeSynced(filepath.Join(dir, n+resealSuffix), data); err != nil {
			aside()
			return fmt.Errorf("writing %s%s: %w", n, resealSuffix, err)
		}
		if err := at(resealStep("aside " + n)); err != nil {
			return err
		}
	}
	form := "clear"
	if to != nil {
		form = "sealed " + to.Fingerprint()
	}
	marker := filepath.Join(dir, ResealMarker)
	if err := writeSynced(marker+".new", []byte(form+"\n"+strings.Join(names, "\n")+"\n")); err != nil {
		aside()
		return fmt.Errorf("writing %s: %w", ResealMarker, err)
	}
	if err := os.Rename(marker+".new", marker); err != nil {
		aside()
		return fmt.Errorf("writing %s: %w", ResealMarker, err)
	}
	syncDir(dir)
	if err := at("marker"); err != nil {
		return err
	}
	return finishReseal(dir, at)
}

// FinishReseal carries through a reseal a crash cut short once its marker
// was written, and drops one that had not got so far (its files aside).
func FinishReseal(dir string) error { return finishReseal(dir, func(resealStep) error { return nil }) }

func finishReseal(dir string, at func(resealStep) error) error {
	marker := filepath.Join(dir, ResealMarker)
	data, err := os.ReadFile(marker)
	if errors.Is(err, fs.ErrNotExist) {
		os.Remove(marker + ".new")
		left, err := filepath.Glob(filepath.Join(dir, "*"+resealSuffix))
		if err != nil {
			return err
		}
		for _, p := range left {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("dropping an unfinished reseal: %w", err)
			}
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", ResealMarker, err)
	}
	lines := strings.Fields(string(bytes.TrimSpace(data)))
	if len(lines) == 0 || (lines[0] != "clear" && lines[0] != "sealed") {
		return fmt.Errorf("%s: expected its first line to be clear or sealed <fingerprint>", ResealMarker)
	}
	sealed := lines[0] == "sealed"
	names := lines[1:]
	if sealed {
		if len(names) == 0 {
			return fmt.Errorf("%s: sealed names no fingerprint", ResealMarker)
		}
		names = names[1:]
	}
	final := func(n string) (keep, drop string) {
		if sealed {
			return n + SealedSuffix, n
		}
		return n, n + SealedSuffix
	}
	for _, n := range names {
		keep, _ := final(n)
		err := os.Rename(filepath.Join(dir, n+resealSuffix), filepath.Join(dir, keep))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("resealing %s: %w", n, err)
		}
		if err := at(resealStep("rename " + n)); err != nil {
			return err
		}
	}
	syncDir(dir)
	for _, n := range names {
		keep, drop := final(n)
		if _, err := os.Stat(filepath.Join(dir, keep)); err != nil {
			continue // never the only form of a key
		}
		if err := os.Remove(filepath.Join(dir, drop)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("resealing %s: removing %s: %w", n, drop, err)
		}
		if err := at(resealStep("remove " + n)); err != nil {
			return err
		}
	}
	syncDir(dir)
	if err := os.Remove(marker); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("finishing a reseal: %w", err)
	}
	syncDir(dir)
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
