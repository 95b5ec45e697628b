package jail

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMakeTargetRefusesTheImagesLinks(t *testing.T) {
	root := t.TempDir()
	host := t.TempDir() // stands for the host's files a link points at
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "etc"), 0o755))
	must(os.Symlink(host, filepath.Join(root, "data")))               // absolute link out
	must(os.Symlink("../../..", filepath.Join(root, "etc", "up")))    // relative link out
	must(os.Symlink(host+"/f", filepath.Join(root, "etc", "secret"))) // file link
	must(os.WriteFile(filepath.Join(root, "etc", "plain"), nil, 0o644))

	tests := []struct {
		target  string
		file    bool
		wantErr error
	}{
		{"/data/x", false, ErrSymlinkInPath},
		{"/data", false, ErrSymlinkInPath},
		{"/etc/up/tmp", false, ErrSymlinkInPath},
		{"/etc/secret", true, ErrSymlinkInPath},
		{"/etc/plain/sub", false, nil}, // not a directory: refused, checked below
	}
	for _, tc := range tests {
		_, err := MakeTarget(root, tc.target, tc.file)
		if err == nil {
			t.Errorf("MakeTarget(%q) succeeded through %s", tc.target, "a link or a file")
			continue
		}
		if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
			t.Errorf("MakeTarget(%q): %v, want %v", tc.target, err, tc.wantErr)
		}
	}
	entries, err := os.ReadDir(host)
	must(err)
	if len(entries) != 0 {
		t.Fatalf("the host directory got %d entries through the image's links", len(entries))
	}

	got, err := MakeTarget(root, "/var/lib/../lib/app//data", false)
	must(err)
	if want := filepath.Join(root, "var/lib/app/data"); got != want {
		t.Fatalf("path %q, want %q", got, want)
	}
	if st, err := os.Lstat(got); err != nil || !st.IsDir() {
		t.Fatalf("target dir not made: %v", err)
	}
	got, err = MakeTarget(root, "/run/secrets/token", true)
	must(err)
	if st, err := os.Lstat(got); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("target file not made: %v", err)
	}
	// Existing targets are fine.
	if _, err := MakeTarget(root, "/run/secrets/token", true); err != nil {
		t.Fatalf("existing file target: %v", err)
	}
	if _, err := MakeTarget(root, "relative", false); err == nil {
		t.Fatal("a relative target must be refused")
	}
}
