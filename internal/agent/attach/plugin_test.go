package attach

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/sys"
)

// markerPlugin is a plugin for the process platform: mount makes the
// directory and writes a marker and its standard input there; unmount
// removes it.
const markerPlugin = `#!/bin/sh
set -e
in=$(cat)
case "$1" in
mount)
	mkdir -p "$2"
	printf '%s' "$in" > "$2/request.json"
	echo mounted > "$2/marker" ;;
unmount)
	rm -rf "$2" ;;
*)
	echo "unknown verb $1" >&2; exit 2 ;;
esac
`

// failingPlugin refuses, saying why on standard error.
const failingPlugin = `#!/bin/sh
cat >/dev/null
echo "export shop/data is offline" >&2
exit 1
`

func installPlugin(t *testing.T, a *Attacher, name, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(a.PluginDir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

func pluginVolume(plugin string) *legion.Volume {
	return volume("data", legion.VolumeSpec{Driver: legion.DriverPlugin,
		Plugin: &legion.PluginVolume{Name: plugin, Options: map[string]string{"export": "shop-data"}, Shared: true}})
}

// A real plugin mounts the volume for two tasks, reads the request on its
// standard input, and unmounts each at its teardown, the second one after
// an agent restart (a new Attacher with nothing but attached.json).
func TestPluginTwoTasksAndTeardownAfterRestart(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	a := node(t, PlatformProcess, f)
	installPlugin(t, a, "marker", markerPlugin)
	t1, t2 := taskDir(t, a, "t1"), taskDir(t, a, "t2")

	var dirs []string
	for _, td := range []string{t1, t2} {
		got, err := a.Attach(context.Background(), td, pluginVolume("marker"))
		if err != nil {
			t.Fatal(err)
		}
		if want := filepath.Join(td, "volumes", "data"); got != want {
			t.Errorf("Attach returned %q, want %q", got, want)
		}
		if b, err := os.ReadFile(filepath.Join(got, "marker")); err != nil || string(b) != "mounted\n" {
			t.Errorf("marker in %s: %q, %v; want the plugin's", got, b, err)
		}
		var req map[string]any
		b, err := os.ReadFile(filepath.Join(got, "request.json"))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatalf("the plugin's standard input %q: %v", b, err)
		}
		want := map[string]any{"namespace": "shop", "volume": "data", "options": map[string]any{"export": "shop-data"}}
		if diff := cmp.Diff(want, req); diff != "" {
			t.Errorf("the plugin's standard input (-want +got):\n%s", diff)
		}
		dirs = append(dirs, got)
	}
	wantLines(t, f) // the process platform runs no system command for a plugin

	if err := a.Detach(context.Background(), t1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dirs[0]); !os.IsNotExist(err) {
		t.Errorf("first task's mount after its teardown: %v, want gone", err)
	}
	if _, err := os.Stat(filepath.Join(dirs[1], "marker")); err != nil {
		t.Errorf("second task's mount after the first's teardown: %v, want it kept", err)
	}

	restarted := &Attacher{Runner: f, RunDir: a.RunDir, PluginDir: a.PluginDir, Platform: PlatformProcess}
	if err := restarted.Detach(context.Background(), t2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dirs[1]); !os.IsNotExist(err) {
		t.Errorf("second task's mount after its teardown: %v, want gone", err)
	}
	for _, td := range []string{t1, t2} {
		if r := records(t, td); r != nil {
			t.Errorf("%s: records after the teardown: %+v, want none", td, r)
		}
	}
}

// A plugin that fails says why, and nothing stays recorded.
func TestPluginFailureSurfacesItsReason(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformProcess, sys.NewFake())
	installPlugin(t, a, "offline", failingPlugin)
	dir := taskDir(t, a, "t1")
	_, err := a.Attach(context.Background(), dir, pluginVolume("offline"))
	if err == nil || !strings.Contains(err.Error(), "exit status 1: export shop/data is offline") {
		t.Fatalf("Attach: %v, want the plugin's exit status and standard error", err)
	}
	if r := records(t, dir); r != nil {
		t.Errorf("records after the failure: %+v, want none", r)
	}
}

// A plugin missing from the node fails the attach, naming it.
func TestPluginMissingRefused(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformProcess, sys.NewFake())
	dir := taskDir(t, a, "t1")
	_, err := a.Attach(context.Background(), dir, pluginVolume("nowhere"))
	want := `plugin "nowhere": not installed on this node (no ` + filepath.Join(a.PluginDir, "nowhere") + ")"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Attach: %v, want %q", err, want)
	}
	if r := records(t, dir); r != nil {
		t.Errorf("records after the refusal: %+v, want none", r)
	}
}

// On FreeBSD the plugin must leave a file system mounted (mount -p says
// so); one gone from the node at teardown has its mount unmounted
// directly.
func TestPluginOnJailsCheckedAndUnmountedWithoutIt(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformJails, nil)
	installPlugin(t, a, "marker", markerPlugin)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(dir, "volumes", "data")
	f := sys.NewFake().On("mount -p", sys.Answer{Stdout: mountTable + "fs.example:/data\t" + mnt + "\tnfs\trw\t0 0\n"})
	a.Runner = f

	if _, err := a.Attach(context.Background(), dir, pluginVolume("marker")); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f, "mount -p")

	if err := os.Remove(filepath.Join(a.PluginDir, "marker")); err != nil {
		t.Fatal(err)
	}
	if err := a.Detach(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f, "umount "+mnt)
	if r := records(t, dir); r != nil {
		t.Errorf("records after the teardown: %+v, want none", r)
	}
}

// A plugin that exits 0 without mounting anything fails the attach on
// FreeBSD, and its unmount is run to undo what it did.
func TestPluginOnJailsThatMountsNothing(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformJails, sys.NewFake().On("mount -p", sys.Answer{Stdout: mountTable}))
	installPlugin(t, a, "marker", markerPlugin)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(dir, "volumes", "data")
	_, err := a.Attach(context.Background(), dir, pluginVolume("marker"))
	if err == nil || !strings.Contains(err.Error(), "left nothing mounted at "+mnt) {
		t.Fatalf("Attach: %v, want nothing mounted refused", err)
	}
	if _, err := os.Stat(mnt); !os.IsNotExist(err) {
		t.Errorf("%s after the undo: %v, want the plugin's unmount to have removed it", mnt, err)
	}
	if r := records(t, dir); r != nil {
		t.Errorf("records after the failure: %+v, want none", r)
	}
}

// The process platform serves plugins only: nfs and iscsi are refused with
// the reason, before anything is recorded or run.
func TestProcessPlatformRefusesNFSAndISCSI(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	a := node(t, PlatformProcess, f)
	dir := taskDir(t, a, "t1")
	for _, tc := range []struct {
		v    *legion.Volume
		want string
	}{
		{nfsVolume(""), "nfs volumes need FreeBSD's mount_nfs; this node runs the process platform"},
		{iscsiVolume("db", 0), "iscsi volumes need FreeBSD's iSCSI initiator (iscsictl) and UFS; this node runs the process platform"},
	} {
		ok, why := a.Serves(tc.v.Spec.Driver)
		if ok || why != tc.want {
			t.Errorf("Serves(%s) = %v, %q; want false, %q", tc.v.Spec.Driver, ok, why, tc.want)
		}
		_, err := a.Attach(context.Background(), dir, tc.v)
		if err == nil || err.Error() != "volume shop/"+tc.v.Metadata.Name+": "+tc.want {
			t.Errorf("Attach(%s): %v, want %q", tc.v.Spec.Driver, err, tc.want)
		}
	}
	if ok, why := a.Serves(legion.DriverPlugin); !ok {
		t.Errorf("Serves(plugin) on the process platform = false, %q; want true", why)
	}
	jails := node(t, PlatformJails, f)
	for _, d := range []legion.VolumeDriver{legion.DriverNFS, legion.DriverISCSI, legion.DriverPlugin} {
		if ok, why := jails.Serves(d); !ok {
			t.Errorf("Serves(%s) on jails = false, %q; want true", d, why)
		}
	}
	wantLines(t, f)
	if r := records(t, dir); r != nil {
		t.Errorf("records after the refusals: %+v, want none", r)
	}
}
