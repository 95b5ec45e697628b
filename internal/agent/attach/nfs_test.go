package attach

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/sys"
)

func nfsVolume(options string) *legion.Volume {
	return volume("media", legion.VolumeSpec{Driver: legion.DriverNFS,
		NFS: &legion.NFSVolume{Server: "files.example", Path: "/exports/shop", Options: options}})
}

// The export is mounted per task in the task's directory, NFSv4 unless the
// options name a version, and unmounted at teardown.
func TestNFSMountAndUnmountPerTask(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	a := node(t, PlatformJails, f)
	dir := taskDir(t, a, "t1")

	got, err := a.Attach(context.Background(), dir, nfsVolume(""))
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "volumes", "media")
	if got != mnt {
		t.Errorf("Attach returned %q, want %q", got, mnt)
	}
	wantLines(t, f, "mount -t nfs -o nfsv4 files.example:/exports/shop "+mnt)
	want := []record{{Driver: legion.DriverNFS, Namespace: "shop", Volume: "media", Dir: mnt}}
	if diff := cmp.Diff(want, records(t, dir)); diff != "" {
		t.Errorf("attached.json (-want +got):\n%s", diff)
	}

	if err := a.Detach(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f, "umount "+mnt)
	if r := records(t, dir); r != nil {
		t.Errorf("attached.json after the teardown: %+v, want none", r)
	}
	// A second teardown finds nothing to do.
	if err := a.Detach(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f)
}

func TestNFSMountOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ server, options, want string }{
		{"files.example", "", "-t nfs -o nfsv4 files.example:/x /m"},
		{"files.example", "rsize=65536,soft", "-t nfs -o nfsv4,rsize=65536,soft files.example:/x /m"},
		{"files.example", "nfsv3,tcp", "-t nfs -o nfsv3,tcp files.example:/x /m"},
		{"files.example", "tcp,vers=3", "-t nfs -o tcp,vers=3 files.example:/x /m"},
		{"files.example", "nfsv4,minorversion=1", "-t nfs -o nfsv4,minorversion=1 files.example:/x /m"},
		{"fd00::5", "", "-t nfs -o nfsv4 [fd00::5]:/x /m"},
	} {
		if got := strings.Join(nfsMountArgs(tc.server, "/x", tc.options, "/m"), " "); got != tc.want {
			t.Errorf("server %q options %q: mount %s, want mount %s", tc.server, tc.options, got, tc.want)
		}
	}
}

// A mount that fails is reported with mount_nfs's words, and undone: the
// umount of a directory with nothing on it answers as FreeBSD's does, and
// the record goes.
func TestNFSMountFailureIsUndone(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	a := node(t, PlatformJails, f)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(dir, "volumes", "media")
	f.On("mount -t nfs", sys.Answer{Code: 1, Stderr: "mount_nfs: files.example: hostname nor servname provided, or not known\n"})
	f.On("umount "+mnt, sys.Answer{Code: 1, Stderr: "umount: " + mnt + ": not a file system root directory\n"})

	_, err := a.Attach(context.Background(), dir, nfsVolume(""))
	if err == nil || !strings.Contains(err.Error(), "hostname nor servname provided") || !strings.Contains(err.Error(), "volume shop/media") {
		t.Fatalf("Attach: %v, want mount_nfs's reason naming the volume", err)
	}
	wantLines(t, f, "mount -t nfs -o nfsv4 files.example:/exports/shop "+mnt, "umount "+mnt)
	if r := records(t, dir); r != nil {
		t.Errorf("attached.json after an undone attach: %+v, want none", r)
	}
}

// An unmount that fails keeps the record for the next try, which a new
// Attacher (after an agent restart) makes from the file alone.
func TestNFSFailedUnmountStaysRecorded(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	a := node(t, PlatformJails, f)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(dir, "volumes", "media")
	if _, err := a.Attach(context.Background(), dir, nfsVolume("")); err != nil {
		t.Fatal(err)
	}
	f.Reset()
	f.Once("umount", sys.Answer{Code: 1, Stderr: "umount: unmount of " + mnt + " failed: Device busy\n"})
	err := a.Detach(context.Background(), dir)
	if err == nil || !strings.Contains(err.Error(), "Device busy") {
		t.Fatalf("Detach: %v, want umount's Device busy", err)
	}
	if r := records(t, dir); len(r) != 1 || r[0].Dir != mnt {
		t.Fatalf("attached.json after a failed teardown: %+v, want the nfs record kept", r)
	}

	restarted := &Attacher{Runner: f, RunDir: a.RunDir, Platform: PlatformJails}
	if err := restarted.Detach(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f, "umount "+mnt, "umount "+mnt)
	if r := records(t, dir); r != nil {
		t.Errorf("attached.json after the retry: %+v, want none", r)
	}
}

// checkingRunner runs check before each command it passes on.
type checkingRunner struct {
	sys.Runner
	check func(sys.Cmd)
}

func (r checkingRunner) Run(ctx context.Context, c sys.Cmd) (sys.Result, error) {
	r.check(c)
	return r.Runner.Run(ctx, c)
}

// The record is on disk before the mount runs, so an agent that dies
// during the mount leaves its teardown something to find.
func TestNFSRecordWrittenBeforeTheMount(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformJails, nil)
	dir := taskDir(t, a, "t1")
	mounts := 0
	a.Runner = checkingRunner{Runner: sys.NewFake(), check: func(c sys.Cmd) {
		if c.Name == "mount" {
			mounts++
			if r := records(t, dir); len(r) != 1 || r[0].Driver != legion.DriverNFS {
				t.Errorf("records when %s ran: %+v, want the nfs record", c, r)
			}
		}
	}}
	if _, err := a.Attach(context.Background(), dir, nfsVolume("")); err != nil {
		t.Fatal(err)
	}
	if mounts != 1 {
		t.Errorf("%d mount commands, want 1", mounts)
	}
}
