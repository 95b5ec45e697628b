package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestImageLoadListRemove(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, err := runLegion(t, "", "image", "load", "--data-dir", dir, "../../examples/hello/hello.oci.tar")
	if err != nil || !strings.HasPrefix(out, "image/localhost/hello:1 loaded (") {
		t.Fatalf("load: %v\n%s", err, out)
	}
	out, err = runLegion(t, "", "image", "ls", "--data-dir", dir)
	if err != nil || !strings.Contains(out, "localhost/hello:1") || !strings.Contains(out, "loaded") {
		t.Fatalf("ls: %v\n%s", err, out)
	}
	if _, err := runLegion(t, "", "image", "rm", "--data-dir", dir, "localhost/nothing:1"); err == nil {
		t.Fatal("removing an image that is not there succeeded")
	}
	out, err = runLegion(t, "", "image", "rm", "--data-dir", dir, "localhost/hello:1")
	if err != nil || out != "image/localhost/hello:1 removed (1 layers freed)\n" {
		t.Fatalf("rm: %v\n%s", err, out)
	}
	out, _ = runLegion(t, "", "image", "ls", "--data-dir", dir)
	if strings.Contains(out, "localhost/hello:1") {
		t.Fatalf("the image is still listed:\n%s", out)
	}
	if _, err := runLegion(t, "", "image", "load", "--data-dir", dir, "../../examples/hello/hello.yaml"); err == nil {
		t.Fatal("loading a YAML file as an image succeeded")
	}
}

// Listing or removing where there is no node's data directory says so,
// and makes none: it said "No images found." and left an empty store.
func TestImageCommandsWithoutADataDirectory(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "none")
	for _, args := range [][]string{{"image", "ls", "--data-dir", dir}, {"image", "rm", "--data-dir", dir, "localhost/hello:1"}} {
		if _, err := runLegion(t, "", args...); err == nil || !strings.Contains(err.Error(), "no node data directory at "+dir) {
			t.Errorf("legion %v: %v, want it to say there is no data directory", args, err)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v, want nothing made", dir, err)
	}
}
