package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// endless gives 'a's forever and fails the test if read past max bytes.
type endless struct {
	t    *testing.T
	max  int64
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	if e.read+int64(len(p)) > e.max {
		p = p[:max(e.max-e.read, 0)]
	}
	if len(p) == 0 {
		e.t.Error("read past the manifest limit")
		return 0, errors.New("read past the limit")
	}
	for i := range p {
		p[i] = 'a'
	}
	e.read += int64(len(p))
	return len(p), nil
}

// An oversized manifest is refused by its size: standard input is not
// read past the limit, and a file over it is not read at all.
func TestOversizedManifestRefusedBySize(t *testing.T) {
	t.Parallel()
	in := &endless{t: t, max: legion.MaxManifestSize + 1}
	_, err := readManifests(in, []string{"-"}, "")
	want := fmt.Sprintf("at most %d (16 MiB) allowed in a manifest", legion.MaxManifestSize)
	if err == nil || !strings.Contains(err.Error(), "standard input: more than") || !strings.Contains(err.Error(), want) {
		t.Fatalf("endless standard input: %v", err)
	}

	dir := t.TempDir()
	big := filepath.Join(dir, "big.yaml")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file: its size says enough, its bytes are never read.
	if err := f.Truncate(100 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := readManifests(nil, []string{big}, ""); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("big.yaml: %d bytes, %s", 100<<20, want)) {
		t.Fatalf("100 MiB file: %v", err)
	}
	// In a directory too.
	if _, err := readManifests(nil, []string{dir}, ""); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("100 MiB file in a directory: %v", err)
	}
}

// diff never prints a Secret's value: it shows its size and whether it
// changed.
func TestDiffMasksSecretValues(t *testing.T) {
	t.Parallel()
	secret := func(value string, labels map[string]string) *legion.Secret {
		o, _ := legion.New(legion.KindSecret)
		s := o.(*legion.Secret)
		s.Metadata = legion.Metadata{Name: "db", Namespace: "default", Labels: labels}
		s.Spec.Data = []byte(value)
		return s
	}
	cases := []struct {
		name       string
		prev, next *legion.Secret
		want       []string
	}{
		{"changed", secret("hunter2", nil), secret("correct horse", nil),
			[]string{"-    data: '(secret data: 7 bytes, live)'", "+    data: '(secret data: 13 bytes, changed)'"}},
		{"changed, same size", secret("hunter2", nil), secret("hunter3", nil),
			[]string{"-    data: '(secret data: 7 bytes, live)'", "+    data: '(secret data: 7 bytes, changed)'"}},
		{"new", nil, secret("hunter2", nil), []string{"+    data: '(secret data: 7 bytes, new)'"}},
		{"labels only", secret("hunter2", map[string]string{"a": "1"}), secret("hunter2", map[string]string{"a": "2"}),
			[]string{"-    a: \"1\"", "+    a: \"2\"", "     data: '(secret data: 7 bytes, unchanged)'"}},
	}
	for _, c := range cases {
		var prev legion.Object
		if c.prev != nil {
			prev = c.prev
		}
		before, after, err := diffViews(prev, c.next)
		if err != nil {
			t.Fatal(err)
		}
		out := unifiedDiff("live", "applied", string(before), string(after))
		for _, secret := range []string{"hunter2", "correct horse", "aHVudGVyMg", "Y29ycmVjdCBob3JzZQ"} {
			if strings.Contains(out, secret) {
				t.Errorf("%s: the diff shows the value %q:\n%s", c.name, secret, out)
			}
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: the diff lacks %q:\n%s", c.name, w, out)
			}
		}
	}
	// Other kinds still diff their spec; a Config of text as its text,
	// line by line, one of bytes as base64.
	o, _ := legion.New(legion.KindConfig)
	cfg := o.(*legion.Config)
	cfg.Metadata.Name, cfg.Spec.Data = "c", []byte("a = 1\nb = 2\n")
	if _, after, err := diffViews(nil, cfg); err != nil || !strings.Contains(string(after), "text: |\n        a = 1\n        b = 2\n") {
		t.Fatalf("a Config's view: %q %v", after, err)
	}
	cfg.Spec.Data = []byte{0, 0xff}
	if _, after, err := diffViews(nil, cfg); err != nil || !strings.Contains(string(after), "data: AP8=") {
		t.Fatalf("a binary Config's view: %q %v", after, err)
	}
}
