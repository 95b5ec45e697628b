package attach

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/sys"
)

// node is an Attacher on a fresh run directory.
func node(t *testing.T, platform string, r sys.Runner) *Attacher {
	t.Helper()
	return &Attacher{Runner: r, RunDir: t.TempDir(), PluginDir: t.TempDir(), Platform: platform}
}

// taskDir makes the private directory of task uid, where the agent has it.
func taskDir(t *testing.T, a *Attacher, uid string) string {
	t.Helper()
	d := filepath.Join(a.RunDir, "tasks", uid)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func volume(name string, spec legion.VolumeSpec) *legion.Volume {
	v := &legion.Volume{Spec: spec}
	v.Kind = legion.KindVolume
	v.Metadata.Namespace, v.Metadata.Name = "shop", name
	return v
}

// records reads a task's attached.json; nil when there is none.
func records(t *testing.T, dir string) []record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, recordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var f recordsFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("attached.json: %v", err)
	}
	return f.Volumes
}

// wantLines compares the commands f ran with want and forgets them.
func wantLines(t *testing.T, f *sys.Fake, want ...string) {
	t.Helper()
	if diff := cmp.Diff(want, f.Lines(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
	f.Reset()
}
