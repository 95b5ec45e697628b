package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent/attach"
	"github.com/legionbsd/legion/internal/agent/volumes"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fakeStore keeps Volumes as directories, snapshots as copies, recording
// every call the agent makes.
type fakeStore struct {
	dir string

	mu    sync.Mutex
	calls []string
	uids  map[string]string   // ns/name -> uid
	snaps map[string][]string // ns/name -> snapshots, oldest first
}

func newFakeStore(t *testing.T) *fakeStore {
	return &fakeStore{dir: t.TempDir(), uids: map[string]string{}, snaps: map[string][]string{}}
}

func (s *fakeStore) record(format string, args ...any) {
	s.calls = append(s.calls, fmt.Sprintf(format, args...))
}

func (s *fakeStore) called() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

func (s *fakeStore) path(ns, name string) string { return filepath.Join(s.dir, "data", ns, name) }
func (s *fakeStore) snap(ns, name, snap string) string {
	return filepath.Join(s.dir, "snaps", ns, name, snap)
}

func (s *fakeStore) Describe(ns, name string) string { return "directory " + s.path(ns, name) }

func (s *fakeStore) Ensure(ctx context.Context, ref volumes.Ref, size int64, o volumes.Owner) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ref.Namespace + "/" + ref.Name
	s.record("ensure %s uid=%s size=%d owner=%d:%d gw=%v", key, ref.UID, size, o.UID, o.GID, o.GroupWritable)
	p := s.path(ref.Namespace, ref.Name)
	if uid, ok := s.uids[key]; ok {
		if uid != ref.UID {
			return "", volumes.ErrOtherVolume
		}
		return p, nil
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return "", err
	}
	mode := os.FileMode(0o755)
	if o.GroupWritable {
		mode = 0o775 | os.ModeSetgid
	}
	if err := os.Chown(p, o.UID, o.GID); err != nil {
		return "", err
	}
	if err := os.Chmod(p, mode); err != nil {
		return "", err
	}
	s.uids[key] = ref.UID
	return p, nil
}

func (s *fakeStore) Resize(ctx context.Context, ref volumes.Ref, size int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ref.Namespace + "/" + ref.Name
	s.record("resize %s uid=%s size=%d", key, ref.UID, size)
	if uid, ok := s.uids[key]; !ok || uid != ref.UID {
		return volumes.ErrOtherVolume
	}
	return nil
}

func (s *fakeStore) List(ctx context.Context) ([]volumes.Local, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []volumes.Local
	for key, uid := range s.uids {
		ns, name, _ := strings.Cut(key, "/")
		out = append(out, volumes.Local{Ref: volumes.Ref{Namespace: ns, Name: name, UID: uid}, Snapshots: slices.Clone(s.snaps[key])})
	}
	return out, nil
}

func (s *fakeStore) Snapshot(ctx context.Context, ns, name, snap string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ns + "/" + name
	s.record("snapshot %s@%s", key, snap)
	if slices.Contains(s.snaps[key], snap) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(s.snap(ns, name, snap)), 0o700); err != nil {
		return err
	}
	if err := os.CopyFS(s.snap(ns, name, snap), os.DirFS(s.path(ns, name))); err != nil {
		return err
	}
	s.snaps[key] = append(s.snaps[key], snap)
	return nil
}

func (s *fakeStore) Rollback(ctx context.Context, ns, name, snap string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ns + "/" + name
	s.record("rollback %s@%s", key, snap)
	i := slices.Index(s.snaps[key], snap)
	if i < 0 {
		return fmt.Errorf("%s@%s: %w", key, snap, volumes.ErrNoSnapshot)
	}
	p := s.path(ns, name)
	if err := os.RemoveAll(p); err != nil {
		return err
	}
	if err := os.CopyFS(p, os.DirFS(s.snap(ns, name, snap))); err != nil {
		return err
	}
	for _, later := range s.snaps[key][i:] {
		os.RemoveAll(s.snap(ns, name, later))
	}
	s.snaps[key] = s.snaps[key][:i]
	return nil
}

func (s *fakeStore) DropSnapshots(ctx context.Context, ns, name, prefix, keep string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ns + "/" + name
	s.record("drop %s %s* keep=%q", key, prefix, keep)
	var left []string
	for _, sn := range s.snaps[key] {
		if strings.HasPrefix(sn, prefix) && sn != keep {
			os.RemoveAll(s.snap(ns, name, sn))
			continue
		}
		left = append(left, sn)
	}
	s.snaps[key] = left
	return nil
}

func (s *fakeStore) Destroy(ctx context.Context, ns, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := ns + "/" + name
	s.record("destroy %s", key)
	delete(s.uids, key)
	delete(s.snaps, key)
	return os.RemoveAll(s.path(ns, name))
}

func (s *fakeStore) Send(ctx context.Context, ns, name, snap, from string, w io.Writer) error {
	return errors.New("fakeStore: no streams")
}

func (s *fakeStore) Receive(ctx context.Context, ref volumes.Ref, size int64, incremental bool, r io.Reader) error {
	return errors.New("fakeStore: no streams")
}

func (s *fakeStore) Restore(ctx context.Context, ref volumes.Ref, size int64, r io.Reader) error {
	return errors.New("fakeStore: no streams")
}

// addLocal makes a copy of a Volume as if an earlier task had.
func (s *fakeStore) addLocal(t *testing.T, ns, name, uid string) {
	t.Helper()
	if _, err := s.Ensure(context.Background(), volumes.Ref{Namespace: ns, Name: name, UID: uid}, 0, volumes.Owner{}); err != nil {
		t.Fatal(err)
	}
}

func (s *fakeStore) has(ns, name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.uids[ns+"/"+name]
	return ok
}

func testVolume(name, uid string, d legion.VolumeDriver) *legion.Volume {
	v := &legion.Volume{}
	v.Metadata.Namespace, v.Metadata.Name, v.Metadata.UID = "default", name, uid
	v.Spec.Driver, v.Spec.Size = d, 1<<20
	return v
}

// volumeTask is testTask mounting the Volume vol writable at /data.
func volumeTask(uid, vol string) *legion.Task {
	t := testTask(uid)
	t.Spec.Pod.Volumes = []legion.PodVolume{{Name: "data", Volume: &legion.VolumeRef{Name: vol}}}
	t.Spec.Volumes = map[string]string{"data": vol}
	t.Spec.Pod.Containers[0].VolumeMounts = []legion.VolumeMount{{Name: "data", Path: "/data"}}
	return t
}

// volumeRig is a rig with a fake local store.
func volumeRig(t *testing.T) (*rig, *fakeStore) {
	r := newRig(t)
	st := newFakeStore(t)
	r.agent.Volumes = st
	return r, st
}

func isRunning(s legion.TaskStatus) bool { return s.State == legion.TaskRunning }

// mountOf is the host path the task's container got for /data.
func (r *rig) mountOf(t *testing.T, uid string) string {
	t.Helper()
	for _, s := range r.rt.created() {
		if s.ID != uid+"-main" {
			continue
		}
		for _, m := range s.Mounts {
			if m.Target == "/data" {
				return m.Source
			}
		}
	}
	t.Fatalf("no /data mount for task %s", uid)
	return ""
}

func TestVolumeRootOwnedByTheContainersUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	r, st := volumeRig(t)
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte("root:*:0:0::/root:/bin/sh\napp:*:1000:1000::/home/app:/bin/sh\n"), 0o644)
	os.WriteFile(filepath.Join(root, "etc/group"), []byte("wheel:*:0:root\napp:*:1000:\n"), 0o644)
	r.images.user, r.images.root = "app", root
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	r.start(t)
	r.assign(nil, volumeTask("t1", "db"))
	r.mgr.await(t, "web-t1", "running", isRunning)

	p := r.mountOf(t, "t1")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	sys := fi.Sys().(*syscall.Stat_t)
	if sys.Uid != 1000 || sys.Gid != 1000 {
		t.Fatalf("volume root owned by %d:%d, want 1000:1000 (the image's user app)", sys.Uid, sys.Gid)
	}
	// A process running as 1000 writes there (through the test's own
	// private directories).
	for d := st.dir; d != filepath.Dir(filepath.Dir(st.dir)); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	cmd := exec.Command("/bin/sh", "-c", "echo ok > "+filepath.Join(p, "marker"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("uid 1000 writing its volume: %v: %s", err, out)
	}
}

func TestVolumeFSGroupOwnsTheRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	r, _ := volumeRig(t)
	r.images.user = "1000:1000"
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	r.start(t)
	task := volumeTask("t1", "db")
	gid := 2000
	task.Spec.Pod.FSGroup = &gid
	r.assign(nil, task)
	r.mgr.await(t, "web-t1", "running", isRunning)

	st, err := os.Stat(r.mountOf(t, "t1"))
	if err != nil {
		t.Fatal(err)
	}
	sys := st.Sys().(*syscall.Stat_t)
	if sys.Gid != 2000 || st.Mode().Perm() != 0o775 || st.Mode()&os.ModeSetgid == 0 {
		t.Fatalf("volume root gid %d mode %v, want gid 2000, 02775", sys.Gid, st.Mode())
	}
}

func TestVolumeClaimedBeforeStartReleasedAfterTheLastTask(t *testing.T) {
	t.Parallel()
	r, st := volumeRig(t)
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	var createdAtClaim []int
	r.mgr.onClaim = func(string) { createdAtClaim = append(createdAtClaim, len(st.called())) }
	r.start(t)
	t1, t2 := volumeTask("t1", "db"), volumeTask("t2", "db")
	r.assign(nil, t1, t2)
	r.mgr.await(t, "web-t1", "t1 running", isRunning)
	r.mgr.await(t, "web-t2", "t2 running", isRunning)
	if got := r.mgr.claimed(); len(got) != 2 || !strings.HasPrefix(got[0], "default/db web-t") || !strings.Contains(got[0], "directory "+st.path("default", "db")) {
		t.Fatalf("claims %q, want one per task naming the task and the backend", got)
	}
	r.mgr.mu.Lock()
	first := createdAtClaim[0]
	r.mgr.mu.Unlock()
	if first != 0 {
		t.Fatalf("the store was called %d times before the first claim: %q", first, st.called())
	}
	// One task stops: the other still uses it.
	r.assign(nil, t2)
	r.mgr.await(t, "web-t1", "t1 shut down", func(s legion.TaskStatus) bool { return s.State == legion.TaskShutdown })
	if got := r.mgr.released(); len(got) != 0 {
		t.Fatalf("released %q while t2 still uses it", got)
	}
	r.assign(nil)
	r.mgr.await(t, "web-t2", "t2 shut down", func(s legion.TaskStatus) bool { return s.State == legion.TaskShutdown })
	waitFor(t, "the release", func() bool { return slices.Equal(r.mgr.released(), []string{"default/db"}) },
		func() string { return fmt.Sprint(r.mgr.released()) })
}

func TestVolumeClaimRefusedFailsTheTask(t *testing.T) {
	t.Parallel()
	r, st := volumeRig(t)
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	r.mgr.refuse["default/db"] = errors.New("volume default/db is held by node n2")
	r.start(t)
	r.assign(nil, volumeTask("t1", "db"))
	s := r.mgr.await(t, "web-t1", "failed", func(s legion.TaskStatus) bool { return s.State == legion.TaskFailed })
	if !strings.Contains(s.Message, "held by node n2") || s.Permanent {
		t.Fatalf("failed with %q permanent=%v, want the manager's message, not permanent", s.Message, s.Permanent)
	}
	if got := st.called(); len(got) != 0 {
		t.Fatalf("the store was used after a refused claim: %q", got)
	}
	if _, err := os.Stat(st.path("default", "db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("volume directory made after a refused claim: %v", err)
	}
	if n := r.rt.startCount("t1-main"); n != 0 {
		t.Fatalf("container started %d times", n)
	}
}

// claimRefused starts a task mounting a Volume whose claims no manager
// takes (an election), and waits for the first to be refused. The
// worker looks whether to ask again only when the test says
// (rig.supervised).
func claimRefused(t *testing.T) (*rig, *fakeStore) {
	t.Helper()
	r, st := volumeRig(t)
	r.agent.superviseTicks = make(chan time.Time)
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	r.mgr.refuse["default/db"] = fmt.Errorf("%w: claim of volume default/db: no leader: an election is in progress", ErrNoManager)
	r.start(t)
	r.assign(nil, volumeTask("t1", "db"))
	waitFor(t, "the claim refused", func() bool { return len(r.mgr.claimed()) == 1 },
		func() string { return fmt.Sprint(r.mgr.claimed()) })
	return r, st
}

// A claim no manager could take (no leader, during an election) is asked
// again, and the task runs once one does: an election fails no task.
func TestVolumeClaimNoManagerTookIsAskedAgain(t *testing.T) {
	t.Parallel()
	r, st := claimRefused(t)
	r.clock.advance(ReportRetry - time.Millisecond)
	r.supervised(t)
	if got := r.mgr.claimed(); len(got) != 1 {
		t.Fatalf("the claim was asked again before its wait was over: %q", got)
	}
	r.clock.advance(time.Millisecond)
	r.supervised(t)
	if got := r.mgr.claimed(); len(got) != 2 {
		t.Fatalf("the claim was not asked again once its wait was over: %q", got)
	}
	if sts := r.mgr.of("web-t1"); slices.ContainsFunc(sts, func(s legion.TaskStatus) bool { return s.State.Terminal() }) {
		t.Fatalf("the task ended while no manager took its claim: %s", describe(sts))
	}
	if got := st.called(); len(got) != 0 {
		t.Fatalf("the store was used before the claim was taken: %q", got)
	}
	r.mgr.mu.Lock()
	delete(r.mgr.refuse, "default/db")
	r.mgr.mu.Unlock()
	r.clock.advance(2 * ReportRetry)
	r.supervised(t)
	r.mgr.await(t, "web-t1", "running once the claim is taken", isState(legion.TaskRunning, ""))
}

// A claim refused through an election is asked again once a leader takes
// the node's calls (a heartbeat), not at the end of its grown wait.
func TestVolumeClaimGoesAgainOnceALeaderIsBack(t *testing.T) {
	t.Parallel()
	r, _ := claimRefused(t)
	r.refusedTwiceMore(t)
	if got := r.mgr.claimed(); len(got) != 3 {
		t.Fatalf("claims %q, want three refused", got)
	}
	r.mgr.mu.Lock()
	delete(r.mgr.refuse, "default/db")
	r.mgr.mu.Unlock()
	r.mgr.beat()
	r.clock.advance(ReportRetry)
	r.supervised(t)
	if got := r.mgr.claimed(); len(got) != 4 {
		t.Fatalf("a heartbeat taken did not bring the claim back before its wait of 4 s was over: %q", got)
	}
	r.mgr.await(t, "web-t1", "running once the claim is taken", isState(legion.TaskRunning, ""))
}

func TestVolumeNFSOnTheProcessPlatformFails(t *testing.T) {
	t.Parallel()
	r, st := volumeRig(t)
	r.agent.Attacher = &attach.Attacher{RunDir: r.agent.RunDir, Platform: attach.PlatformProcess}
	v := testVolume("share", "v1", legion.DriverNFS)
	v.Spec.NFS = &legion.NFSVolume{Server: "10.0.0.1", Path: "/export"}
	r.mgr.addVolume(v)
	r.start(t)
	r.assign(nil, volumeTask("t1", "share"))
	s := r.mgr.await(t, "web-t1", "failed", func(s legion.TaskStatus) bool { return s.State == legion.TaskFailed })
	if !strings.Contains(s.Message, "driver nfs: nfs volumes need FreeBSD's mount_nfs") {
		t.Fatalf("failed with %q, want the driver's reason", s.Message)
	}
	if len(r.mgr.claimed()) != 0 || len(st.called()) != 0 {
		t.Fatalf("claims %q, store calls %q: nothing should be claimed or made", r.mgr.claimed(), st.called())
	}
}

// snapshotTask is a task of update generation gen of a stateful service.
func snapshotTask(uid string, gen string, restore bool) *legion.Task {
	t := volumeTask(uid, "db")
	t.Spec.Snapshot = &legion.TaskSnapshot{Name: "legion-update-" + gen, Restore: restore}
	return t
}

func TestVolumeSnapshotBeforeStartDropsOlderOnes(t *testing.T) {
	t.Parallel()
	r, st := volumeRig(t)
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	st.addLocal(t, "default", "db", "v1")
	ctx := context.Background()
	st.Snapshot(ctx, "default", "db", "legion-update-3")
	st.Snapshot(ctx, "default", "db", "legion-backup-x")
	st.Snapshot(ctx, "default", "db", "legion-move-1") // the move here is over
	// The store's calls before the first claim.
	atClaim := -1
	r.mgr.onClaim = func(string) {
		if atClaim < 0 {
			atClaim = len(st.called())
		}
	}
	r.start(t)
	r.assign(nil, snapshotTask("t1", "4", false))
	r.mgr.await(t, "web-t1", "running", isRunning)
	r.mgr.mu.Lock()
	calls := st.called()[atClaim:]
	r.mgr.mu.Unlock()
	want := []string{`drop default/db legion-move-* keep=""`, "snapshot default/db@legion-update-4", `drop default/db legion-update-* keep="legion-update-4"`}
	for _, w := range want {
		if !slices.Contains(calls, w) {
			t.Fatalf("store calls %q, want %q among them", calls, w)
		}
	}
	ls, _ := st.List(ctx)
	if len(ls) != 1 || !slices.Equal(ls[0].Snapshots, []string{"legion-backup-x", "legion-update-4"}) {
		t.Fatalf("snapshots %v, want the backup's and the new update's", ls)
	}
	// The Volume's status says so: claimed with those there were, then
	// again with those the step left.
	if got := r.mgr.snapshotsOf("default/db"); !slices.Equal(got, ls[0].Snapshots) {
		t.Fatalf("the Volume's status lists snapshots %q, the node holds %q", got, ls[0].Snapshots)
	}
	if got := r.mgr.claimed(); len(got) != 2 {
		t.Fatalf("claims %q, want the claim and one more once the step changed the snapshots", got)
	}
}

func TestVolumeRestoreRollsBackTheData(t *testing.T) {
	t.Parallel()
	r, st := volumeRig(t)
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	st.addLocal(t, "default", "db", "v1")
	p := st.path("default", "db")
	os.WriteFile(filepath.Join(p, "row"), []byte("before the update"), 0o644)
	st.Snapshot(context.Background(), "default", "db", "legion-update-4")
	os.WriteFile(filepath.Join(p, "row"), []byte("written by the failed version"), 0o644)
	r.start(t)
	r.assign(nil, snapshotTask("t1", "4", true))
	r.mgr.await(t, "web-t1", "running", isRunning)
	data, err := os.ReadFile(filepath.Join(r.mountOf(t, "t1"), "row"))
	if err != nil || string(data) != "before the update" {
		t.Fatalf("after the restore the volume holds %q (%v), want the snapshot's data", data, err)
	}
	if ls, _ := st.List(context.Background()); len(ls[0].Snapshots) != 0 {
		t.Fatalf("snapshots %v left after the rollback, want none", ls[0].Snapshots)
	}
	if got := r.mgr.snapshotsOf("default/db"); len(got) != 0 {
		t.Fatalf("the Volume's status lists snapshots %q after the rollback dropped them", got)
	}
}

func TestVolumeRestoreWithoutSnapshotKeepsTheData(t *testing.T) {
	t.Parallel()
	r, st := volumeRig(t)
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	st.addLocal(t, "default", "db", "v1")
	os.WriteFile(filepath.Join(st.path("default", "db"), "row"), []byte("kept"), 0o644)
	r.start(t)
	r.assign(nil, snapshotTask("t1", "4", true))
	r.mgr.await(t, "web-t1", "running", isRunning)
	if data, err := os.ReadFile(filepath.Join(r.mountOf(t, "t1"), "row")); err != nil || string(data) != "kept" {
		t.Fatalf("volume holds %q (%v), want its data kept", data, err)
	}
}

func TestVolumeLocalCopiesReconciled(t *testing.T) {
	t.Parallel()
	r, st := volumeRig(t)
	elsewhere := r.mgr.addVolume(testVolume("gone", "v1", legion.DriverZFS))
	elsewhere.Status.Node = "n2"
	moving := r.mgr.addVolume(testVolume("moving", "v2", legion.DriverZFS))
	moving.Status.Node = "n2"
	moving.Status.Migration = &legion.VolumeMigration{State: legion.MigrationCopying, From: "n2", To: testNode}
	r.mgr.addVolume(testVolume("used", "v3", legion.DriverZFS))
	other := r.mgr.addVolume(testVolume("reused", "v9", legion.DriverZFS)) // a new Volume of an old name
	other.Status.Node = "n2"
	for name, uid := range map[string]string{"gone": "v1", "moving": "v2", "used": "v3", "reused": "v4", "deleted": "v5"} {
		st.addLocal(t, "default", name, uid)
	}
	r.start(t)
	r.assign(nil, volumeTask("t1", "used"))
	r.mgr.await(t, "web-t1", "running", isRunning)
	waitFor(t, "the unwanted copies destroyed", func() bool { return !st.has("default", "gone") && !st.has("default", "deleted") },
		func() string { return fmt.Sprint(st.called()) })
	for _, name := range []string{"moving", "used", "reused"} {
		if !st.has("default", name) {
			t.Errorf("copy of %s destroyed; calls %q", name, st.called())
		}
	}
}

func TestVolumeSessionsRoundTripThroughDirStores(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	from := &Agent{Node: "n1", Volumes: volumes.NewDir(t.TempDir())}
	to := &Agent{Node: "n2", Volumes: volumes.NewDir(t.TempDir())}
	ref := volumes.Ref{Namespace: "default", Name: "db", UID: "v1"}
	p, err := from.Volumes.Ensure(ctx, ref, 0, volumes.Owner{})
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p, "row"), []byte("marker"), 0o644)

	var full bytes.Buffer
	if err := from.SendVolume(ctx, &legionpb.VolumeSendOffer{Namespace: "default", Volume: "db", VolumeUid: "v1", Snapshot: "legion-move-1"}, &full); err != nil {
		t.Fatal(err)
	}
	spec, _ := json.Marshal(legion.VolumeSpec{Driver: legion.DriverZFS})
	if err := to.ReceiveVolume(ctx, &legionpb.VolumeReceiveOffer{Namespace: "default", Volume: "db", VolumeUid: "v1", Spec: spec}, bytes.NewReader(full.Bytes())); err != nil {
		t.Fatal(err)
	}
	got, err := to.Volumes.Ensure(ctx, ref, 0, volumes.Owner{})
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(got, "row")); err != nil || string(data) != "marker" {
		t.Fatalf("received volume holds %q (%v), want the sent data", data, err)
	}
	// A restore where data of that name is: refused, the data left alone.
	err = to.ReceiveVolume(ctx, &legionpb.VolumeReceiveOffer{Namespace: "default", Volume: "db", VolumeUid: "v2", Restore: true, Spec: spec}, bytes.NewReader(full.Bytes()))
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("restore over existing data: %v, want FailedPrecondition", err)
	}
	// A backup's send drops its snapshot afterwards.
	var backup bytes.Buffer
	if err := from.SendVolume(ctx, &legionpb.VolumeSendOffer{Namespace: "default", Volume: "db", VolumeUid: "v1", Snapshot: "legion-backup-1", DropSnapshot: true}, &backup); err != nil {
		t.Fatal(err)
	}
	l, err := from.local(ctx, "default", "db")
	if err != nil || l == nil || slices.Contains(l.Snapshots, "legion-backup-1") || !slices.Contains(l.Snapshots, "legion-move-1") {
		t.Fatalf("snapshots after a backup %+v (%v), want the move's kept and the backup's dropped", l, err)
	}
	// Dropping the old copy: refused while a task uses it, done after.
	from.vl.use("default/db", "t1")
	drop := &legionpb.VolumeDropOffer{Namespace: "default", Volume: "db", VolumeUid: "v1"}
	if err := from.DropVolume(ctx, drop); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("drop while in use: %v, want FailedPrecondition", err)
	}
	from.vl.drop("default/db", "t1")
	if err := from.DropVolume(ctx, drop); err != nil {
		t.Fatal(err)
	}
	if l, err := from.local(ctx, "default", "db"); err != nil || l != nil {
		t.Fatalf("copy left after the drop: %+v (%v)", l, err)
	}
}

// A local Volume resized while a task here mounts it (a claim grown with
// its service) gets its new size then, not at its next mount; a set that
// changes nothing resizes nothing.
func TestVolumeResizedWhileInUse(t *testing.T) {
	t.Parallel()
	r, st := volumeRig(t)
	r.mgr.addVolume(testVolume("db", "v1", legion.DriverZFS))
	r.start(t)
	t1 := volumeTask("t1", "db")
	r.assign(nil, t1)
	r.mgr.await(t, "web-t1", "t1 running", isRunning)
	resizes := func() []string {
		var out []string
		for _, c := range st.called() {
			if strings.HasPrefix(c, "resize ") {
				out = append(out, c)
			}
		}
		return out
	}
	r.mgr.mu.Lock()
	r.mgr.volumes["default/db"].Spec.Size = 2 << 20
	r.mgr.mu.Unlock()
	r.assign(nil, t1)
	want := []string{"resize default/db uid=v1 size=2097152"}
	waitFor(t, "the resize", func() bool { return slices.Equal(resizes(), want) }, func() string { return fmt.Sprint(st.called()) })
	// The same size again, then another: one more resize, not two.
	r.assign(nil, t1)
	r.mgr.mu.Lock()
	r.mgr.volumes["default/db"].Spec.Size = 3 << 20
	r.mgr.mu.Unlock()
	r.assign(nil, t1)
	want = append(want, "resize default/db uid=v1 size=3145728")
	waitFor(t, "the second resize", func() bool { return len(resizes()) >= 2 }, func() string { return fmt.Sprint(st.called()) })
	if got := resizes(); !slices.Equal(got, want) {
		t.Errorf("resizes %q; want %q", got, want)
	}
}
