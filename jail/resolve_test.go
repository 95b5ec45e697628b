package jail

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A command is found along the container's PATH inside its root; a
// missing one is named with the PATH searched, once.
func TestResolveCommand(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "app", "server"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := ResolveCommand(root, "server", "/bin:/app"); err != nil || got != "/app/server" {
		t.Errorf("server: %q, %v; want /app/server", got, err)
	}
	if got, err := ResolveCommand(root, "./server", "/app"); err != nil || got != "./server" {
		t.Errorf("./server: %q, %v; taken as it is", got, err)
	}
	_, err := ResolveCommand(root, "wget", "/app")
	if !errors.Is(err, exec.ErrNotFound) || err.Error() != "wget: executable file not found in $PATH (PATH=/app)" {
		t.Errorf("wget: %v, want exec.ErrNotFound naming the PATH once", err)
	}
}
