package main

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/daemon"
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
	if err != nil || out != "image/localhost/hello:1 removed (1 layer freed)\n" {
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

// An image a container of the node was made from is not removed without
// --force: its task could not start again here (docker rmi refuses it
// too). Before, rm took it, and the next restart of the service failed
// with "image not present".
func TestImageRemoveRefusesAnImageInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := runLegion(t, "", "image", "load", "--data-dir", dir, "../../examples/hello/hello.oci.tar"); err != nil {
		t.Fatalf("load: %v\n%s", err, out)
	}
	m, err := daemon.OpenImages(daemon.Options{DataDir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	// The root is an overlay mount on Linux: the store unmounts and removes
	// it, before the temporary directory goes (registered first, so run
	// after).
	t.Cleanup(func() {
		if err := m.RemoveRoot(context.Background(), "c1"); err != nil {
			t.Errorf("removing the test's container root: %v", err)
		}
	})
	if _, err := m.PrepareRoot(context.Background(), "c1", "localhost/hello:1", "", time.Now()); err != nil {
		t.Fatal(err)
	}
	out, err := runLegion(t, "", "image", "rm", "--data-dir", dir, "localhost/hello:1")
	if err == nil || !strings.Contains(err.Error(), "image localhost/hello:1: 1 container(s) of this node were made from its content (c1)") ||
		!strings.Contains(err.Error(), "--force") {
		t.Fatalf("rm of an image in use: %v\n%s", err, out)
	}
	if out, _ := runLegion(t, "", "image", "ls", "--data-dir", dir); !strings.Contains(out, "localhost/hello:1") {
		t.Fatalf("the refused image is gone:\n%s", out)
	}
	out, err = runLegion(t, "", "image", "rm", "--data-dir", dir, "localhost/hello:1", "--force")
	if err != nil || out != "image/localhost/hello:1 removed (0 layers freed)\n" {
		t.Fatalf("rm --force: %v\n%s", err, out)
	}
}
