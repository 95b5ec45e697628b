package server

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A second daemon on a data directory in use is refused at once, naming
// the process holding it; once the first stops, the directory is free.
func TestSecondServerOnADataDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := New(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			first.Stop()
		}
	})
	_, err = New(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if !errors.Is(err, ErrDataDirInUse) || !strings.Contains(err.Error(), "process "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("a second server on %s: %v, want ErrDataDirInUse naming this process", dir, err)
	}
	first.Stop()
	stopped = true
	again, err := New(Config{DataDir: dir, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("after the first stopped: %v", err)
	}
	again.Stop()
}
