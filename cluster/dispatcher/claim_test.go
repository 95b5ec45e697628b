package dispatcher_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

func zfsVolume(ns, name string) *legion.Volume {
	return &legion.Volume{Header: header(legion.KindVolume, ns, name), Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 30}}
}

func iscsiVolume(ns, name string) *legion.Volume {
	return &legion.Volume{Header: header(legion.KindVolume, ns, name), Spec: legion.VolumeSpec{Driver: legion.DriverISCSI,
		ISCSI: &legion.ISCSIVolume{Portal: "192.0.2.5", Target: "iqn.2026-01.example:db"}}}
}

func pluginVolume(ns, name string, shared bool) *legion.Volume {
	return &legion.Volume{Header: header(legion.KindVolume, ns, name), Spec: legion.VolumeSpec{Driver: legion.DriverPlugin,
		Plugin: &legion.PluginVolume{Name: "ceph", Shared: shared}}}
}

func nfsVolume(ns, name string) *legion.Volume {
	return &legion.Volume{Header: header(legion.KindVolume, ns, name), Spec: legion.VolumeSpec{Driver: legion.DriverNFS,
		NFS: &legion.NFSVolume{Server: "192.0.2.6", Path: "/export/shop"}}}
}

// putVolume admits and writes v, then its status (admission clears it).
func putVolume(t *testing.T, st *store.Store, v *legion.Volume) {
	t.Helper()
	want := v.Status
	stored := put(t, st, v).(*legion.Volume)
	stored.Status = want
	if _, err := st.PutStatus(context.Background(), stored, store.Precondition{}); err != nil {
		t.Fatal(err)
	}
}

// mounting is a task on node whose pod volume "data" is the Volume named.
func mounting(ns, name, node, volume string) *legion.Task {
	t := task(ns, name, node, "", "", "")
	t.Spec.Volumes = map[string]string{"data": volume}
	return t
}

// claimer is a node's client whose certificate is on record, so that its
// calls write nothing but what they decide.
func claimer(t *testing.T, m *dispatchertest.Manager, name string) legionpb.DispatcherClient {
	t.Helper()
	creds := dispatchertest.Credentials(t, m.CA, name, pki.RoleWorker)
	dispatchertest.Record(t, m.Store, creds)
	return dialTLS(t, m.Addr, creds.ClientConfig())
}

func claim(t *testing.T, c legionpb.DispatcherClient, ns, name, task, backend string) (*legion.Volume, error) {
	t.Helper()
	r, err := c.ClaimVolume(ctxT(t), &legionpb.ClaimVolumeRequest{Namespace: ns, Name: name, Task: task, Backend: backend})
	if err != nil {
		return nil, err
	}
	o, err := legion.FromJSON(r.GetVolume())
	if err != nil {
		t.Fatalf("claim reply: %v", err)
	}
	return o.(*legion.Volume), nil
}

func release(t *testing.T, c legionpb.DispatcherClient, ns, name string) error {
	t.Helper()
	_, err := c.ClaimVolume(ctxT(t), &legionpb.ClaimVolumeRequest{Namespace: ns, Name: name, Release: true})
	return err
}

func getVolume(t *testing.T, st *store.Store, ns, name string) *legion.Volume {
	t.Helper()
	o, _, err := st.Get(legion.KindVolume, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*legion.Volume)
}

// writesNothing fails the test when do writes to the store.
func writesNothing(t *testing.T, st *store.Store, what string, do func()) {
	t.Helper()
	before := st.Raft().LastIndex()
	do()
	if after := st.Raft().LastIndex(); after != before {
		t.Errorf("%s wrote to the store: last index %d -> %d", what, before, after)
	}
}

// refused checks err's code and that its message names each of words.
func refused(t *testing.T, what string, err error, code codes.Code, words ...string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: %v, want %s", what, err, code)
	}
	for _, w := range words {
		if !strings.Contains(status.Convert(err).Message(), w) {
			t.Errorf("%s: %q does not name %q", what, status.Convert(err).Message(), w)
		}
	}
}

// A ZFS Volume is bound for good to the first node that claims it: the
// claim writes the node and its backend (clearing an old message); others
// are refused naming the holder; the holder's repeated claim and any
// release write nothing.
func TestClaimBindsAZFSVolumeToTheFirstNodeForGood(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	v := zfsVolume("shop", "db")
	v.Status.Message = "node node-c was removed: its data is gone"
	putVolume(t, m.Store, v)
	if got := getVolume(t, m.Store, "shop", "db").Status.Message; got == "" {
		t.Fatal("the test's message was not stored")
	}
	put(t, m.Store, mounting("shop", "db-0", "node-a", "db"))
	put(t, m.Store, mounting("shop", "db-1", "node-b", "db"))
	a, b := claimer(t, m, "node-a"), claimer(t, m, "node-b")

	got, err := claim(t, a, "shop", "db", "db-0", "zfs dataset tank/legion/volumes/shop/db")
	if err != nil {
		t.Fatal(err)
	}
	stored := getVolume(t, m.Store, "shop", "db")
	want := legion.VolumeStatus{Node: "node-a", Backend: "zfs dataset tank/legion/volumes/shop/db"}
	if diff := cmp.Diff(want, stored.Status); diff != "" {
		t.Fatalf("after the first claim (-want +stored):\n%s", diff)
	}
	if diff := cmp.Diff(stored, got); diff != "" {
		t.Errorf("the reply is not the Volume as stored (-stored +reply):\n%s", diff)
	}

	writesNothing(t, m.Store, "a claim by another node", func() {
		_, err := claim(t, b, "shop", "db", "db-1", "zfs dataset tank/legion/volumes/shop/db")
		refused(t, "node-b's claim", err, codes.FailedPrecondition, "volume shop/db is held by node node-a")
	})
	writesNothing(t, m.Store, "the holder's claim again", func() {
		if _, err := claim(t, a, "shop", "db", "db-0", "zfs dataset tank/legion/volumes/shop/db"); err != nil {
			t.Fatal(err)
		}
	})
	writesNothing(t, m.Store, "releases of a ZFS Volume", func() {
		if err := release(t, a, "shop", "db"); err != nil {
			t.Fatalf("the holder's release: %v", err)
		}
		if err := release(t, b, "shop", "db"); err != nil {
			t.Fatalf("another node's release: %v", err)
		}
	})
	if diff := cmp.Diff(want, getVolume(t, m.Store, "shop", "db").Status); diff != "" {
		t.Fatalf("after the releases (-want +stored):\n%s", diff)
	}
	// The holder's agent keeping the data another way says so.
	if _, err := claim(t, a, "shop", "db", "db-0", "directory /var/db/legion/volumes/shop/db"); err != nil {
		t.Fatal(err)
	}
	if got := getVolume(t, m.Store, "shop", "db").Status.Backend; got != "directory /var/db/legion/volumes/shop/db" {
		t.Errorf("backend after the holder's new one: %q", got)
	}
}

// The holder's claims keep the Volume's snapshots on its node in the
// status: as the first claim finds them, and again when a task's
// snapshot step changed them. A claim that says nothing of them (an
// agent from before) leaves them, another node's claim is refused
// without touching them, and a release may not name any.
func TestClaimKeepsTheHoldersSnapshots(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	putVolume(t, m.Store, zfsVolume("shop", "db"))
	put(t, m.Store, mounting("shop", "db-0", "node-a", "db"))
	put(t, m.Store, mounting("shop", "db-1", "node-b", "db"))
	a, b := claimer(t, m, "node-a"), claimer(t, m, "node-b")
	const backend = "zfs dataset tank/legion/volumes/shop/db"
	claimWith := func(c legionpb.DispatcherClient, task string, snaps []string) error {
		t.Helper()
		_, err := c.ClaimVolume(ctxT(t), &legionpb.ClaimVolumeRequest{Namespace: "shop", Name: "db", Task: task, Backend: backend,
			Snapshots: snaps, WithSnapshots: true})
		return err
	}
	snapshots := func() []string { return getVolume(t, m.Store, "shop", "db").Status.Snapshots }

	if err := claimWith(a, "db-0", []string{"legion-update-3"}); err != nil {
		t.Fatal(err)
	}
	if got := snapshots(); !slices.Equal(got, []string{"legion-update-3"}) {
		t.Fatalf("after the first claim: snapshots %q", got)
	}
	if err := claimWith(a, "db-0", []string{"legion-update-4"}); err != nil {
		t.Fatal(err)
	}
	if got := snapshots(); !slices.Equal(got, []string{"legion-update-4"}) {
		t.Fatalf("after the update's snapshot step: snapshots %q", got)
	}
	writesNothing(t, m.Store, "the same snapshots again", func() {
		if err := claimWith(a, "db-0", []string{"legion-update-4"}); err != nil {
			t.Fatal(err)
		}
	})
	writesNothing(t, m.Store, "a claim that says nothing of them", func() {
		if _, err := claim(t, a, "shop", "db", "db-0", backend); err != nil {
			t.Fatal(err)
		}
	})
	writesNothing(t, m.Store, "another node's claim", func() {
		refused(t, "node-b's claim", claimWith(b, "db-1", nil), codes.FailedPrecondition, "held by node node-a")
	})
	if err := claimWith(a, "db-0", nil); err != nil {
		t.Fatal(err)
	}
	if got := snapshots(); len(got) != 0 {
		t.Fatalf("after a rollback dropped it: snapshots %q", got)
	}
	_, err := a.ClaimVolume(ctxT(t), &legionpb.ClaimVolumeRequest{Namespace: "shop", Name: "db", Release: true, WithSnapshots: true})
	refused(t, "a release with snapshots", err, codes.InvalidArgument, "snapshots")
}

// iSCSI and unshared plugin Volumes are bound only while the holder's
// tasks use them: its release frees them for another node; a release by
// a node that does not hold one changes nothing.
func TestClaimReleaseFreesVolumesUsedOneNodeAtATime(t *testing.T) {
	t.Parallel()
	for _, v := range []*legion.Volume{iscsiVolume("shop", "lun"), pluginVolume("shop", "rbd", false)} {
		t.Run(string(v.Spec.Driver), func(t *testing.T) {
			t.Parallel()
			m := dispatchertest.Start(t)
			name := v.Metadata.Name
			put(t, m.Store, v)
			put(t, m.Store, mounting("shop", "x-0", "node-a", name))
			put(t, m.Store, mounting("shop", "x-1", "node-b", name))
			a, b := claimer(t, m, "node-a"), claimer(t, m, "node-b")
			if _, err := claim(t, a, "shop", name, "x-0", "iscsi da1"); err != nil {
				t.Fatal(err)
			}
			writesNothing(t, m.Store, "node-b's claim and release", func() {
				_, err := claim(t, b, "shop", name, "x-1", "iscsi da3")
				refused(t, "node-b's claim", err, codes.FailedPrecondition, "volume shop/"+name+" is held by node node-a")
				if err := release(t, b, "shop", name); err != nil {
					t.Fatalf("node-b's release: %v", err)
				}
			})
			if err := release(t, a, "shop", name); err != nil {
				t.Fatal(err)
			}
			if st := getVolume(t, m.Store, "shop", name).Status; st.Node != "" || st.Backend != "" {
				t.Fatalf("after the holder's release: %+v, want free", st)
			}
			if _, err := claim(t, b, "shop", name, "x-1", "iscsi da3"); err != nil {
				t.Fatalf("node-b's claim once free: %v", err)
			}
			if st := getVolume(t, m.Store, "shop", name).Status; st.Node != "node-b" || st.Backend != "iscsi da3" {
				t.Fatalf("after node-b's claim: %+v", st)
			}
		})
	}
}

// NFS and shared plugin Volumes are used by any node at once: claims and
// releases are granted and write nothing.
func TestSharedVolumesAreNeverBound(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	a, b := claimer(t, m, "node-a"), claimer(t, m, "node-b")
	for _, v := range []*legion.Volume{nfsVolume("shop", "media"), pluginVolume("shop", "cephfs", true)} {
		name := v.Metadata.Name
		put(t, m.Store, v)
		put(t, m.Store, mounting("shop", name+"-0", "node-a", name))
		put(t, m.Store, mounting("shop", name+"-1", "node-b", name))
		writesNothing(t, m.Store, "claims of a shared volume", func() {
			for _, c := range []struct {
				client legionpb.DispatcherClient
				task   string
			}{{a, name + "-0"}, {b, name + "-1"}} {
				got, err := claim(t, c.client, "shop", name, c.task, "nfs mount")
				if err != nil {
					t.Fatalf("claim of %s: %v", name, err)
				}
				if got.Status.Node != "" || got.Metadata.Name != name {
					t.Errorf("claim of %s replied %+v, want the unbound Volume", name, got)
				}
			}
			if err := release(t, a, "shop", name); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A node claims only for a live task of its own that mounts the Volume;
// each refusal names the task and the Volume and writes nothing.
func TestClaimOnlyForTheNodesOwnTaskMountingIt(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	put(t, m.Store, zfsVolume("shop", "db"))
	put(t, m.Store, mounting("shop", "db-1", "node-b", "db"))
	put(t, m.Store, task("shop", "web-0", "node-a", "", "", ""))
	done := mounting("shop", "db-old", "node-a", "db")
	done.Status.State = legion.TaskShutdown
	put(t, m.Store, done)
	put(t, m.Store, mounting("shop", "db-0", "node-a", "db"))
	a := claimer(t, m, "node-a")
	writesNothing(t, m.Store, "refused claims", func() {
		for _, c := range []struct {
			task  string
			code  codes.Code
			words []string
		}{
			{"db-1", codes.PermissionDenied, []string{"task shop/db-1", "node-b", "volume shop/db"}},
			{"web-0", codes.PermissionDenied, []string{"task shop/web-0 does not mount volume shop/db"}},
			{"missing", codes.PermissionDenied, []string{"task shop/missing", "volume shop/db"}},
			{"db-old", codes.PermissionDenied, []string{"task shop/db-old", "shutdown", "volume shop/db"}},
			{"", codes.InvalidArgument, []string{"task:"}},
		} {
			_, err := claim(t, a, "shop", "db", c.task, "zfs")
			refused(t, "claim for task "+c.task, err, c.code, c.words...)
		}
		_, err := claim(t, a, "shop", "nothing", "db-0", "zfs")
		refused(t, "claim of a Volume that does not exist", err, codes.NotFound, "shop/nothing")
		_, err = a.ClaimVolume(ctxT(t), &legionpb.ClaimVolumeRequest{Node: "node-b", Namespace: "shop", Name: "db", Task: "db-1"})
		refused(t, "claim as another node", err, codes.PermissionDenied, "node-b")
		_, err = a.ClaimVolume(ctxT(t), &legionpb.ClaimVolumeRequest{Namespace: "shop", Name: "db", Task: "db-0", Release: true})
		refused(t, "release naming a task", err, codes.InvalidArgument, "task")
	})
	if st := getVolume(t, m.Store, "shop", "db").Status; st.Node != "" {
		t.Fatalf("refused claims bound the volume: %+v", st)
	}
	if _, err := claim(t, a, "shop", "db", "db-0", "zfs"); err != nil {
		t.Fatalf("claim for the node's own task: %v", err)
	}
}

// A moving Volume is claimed only by the node it moves from while the
// full copy is made (its task still runs there); the node it moves to
// waits for the move to end.
func TestClaimOfAMovingVolume(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	v := zfsVolume("shop", "db")
	v.Status = legion.VolumeStatus{Node: "node-a", Backend: "zfs", Migration: &legion.VolumeMigration{State: legion.MigrationCopying, From: "node-a", To: "node-b"}}
	putVolume(t, m.Store, v)
	put(t, m.Store, mounting("shop", "db-0", "node-a", "db"))
	put(t, m.Store, mounting("shop", "db-0-new", "node-b", "db"))
	a, b := claimer(t, m, "node-a"), claimer(t, m, "node-b")
	writesNothing(t, m.Store, "claims of a moving volume", func() {
		_, err := claim(t, b, "shop", "db", "db-0-new", "zfs")
		refused(t, "the target's claim", err, codes.FailedPrecondition, "volume shop/db is moving from node-a to node-b")
		if _, err := claim(t, a, "shop", "db", "db-0", "zfs"); err != nil {
			t.Fatalf("the source's claim while copying: %v", err)
		}
	})
	v = getVolume(t, m.Store, "shop", "db")
	v.Status.Migration.State = legion.MigrationCopied
	if _, err := m.Store.PutStatus(context.Background(), v, store.Precondition{}); err != nil {
		t.Fatal(err)
	}
	_, err := claim(t, a, "shop", "db", "db-0", "zfs")
	refused(t, "the source's claim once copied", err, codes.FailedPrecondition, "volume shop/db is moving from node-a to node-b")
}

// A free ZFS Volume asked to be on a node is refused to others.
func TestClaimOfAVolumeAskedOnAnotherNode(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	v := zfsVolume("shop", "db")
	v.Spec.Node = "node-b"
	put(t, m.Store, v)
	put(t, m.Store, mounting("shop", "db-0", "node-a", "db"))
	put(t, m.Store, mounting("shop", "db-1", "node-b", "db"))
	a, b := claimer(t, m, "node-a"), claimer(t, m, "node-b")
	writesNothing(t, m.Store, "a claim by a node the Volume is not asked on", func() {
		_, err := claim(t, a, "shop", "db", "db-0", "zfs")
		refused(t, "node-a's claim", err, codes.FailedPrecondition, "volume shop/db is asked to be on node node-b")
	})
	if _, err := claim(t, b, "shop", "db", "db-1", "zfs"); err != nil {
		t.Fatalf("node-b's claim: %v", err)
	}
}

// A follower sends a claim to the leader, naming it, and writes nothing.
func TestClaimOnAFollowerNamesTheLeader(t *testing.T) {
	t.Parallel()
	ca := dispatchertest.NewCA(t)
	lst, fst := dispatchertest.OpenPair(t)
	put(t, lst, zfsVolume("shop", "db"))
	put(t, lst, mounting("shop", "db-0", "node-a", "db"))
	creds := dispatchertest.Credentials(t, ca, "node-a", pki.RoleWorker)
	dispatchertest.Record(t, lst, creds)
	dispatchertest.Poll(t, "replication", 10*time.Second, func() bool { return fst.AppliedIndex() >= lst.AppliedIndex() })
	f := dispatchertest.Serve(t, ca, fst, nil, func() (string, []string) { return "leader:7946", nil })
	c := dialTLS(t, f.Addr, creds.ClientConfig())
	writesNothing(t, lst, "a claim on the follower", func() {
		_, err := claim(t, c, "shop", "db", "db-0", "zfs")
		refused(t, "claim on the follower", err, codes.Unavailable, "leader:7946")
		var named string
		for _, d := range status.Convert(err).Details() {
			if nl, ok := d.(*legionpb.NotLeader); ok {
				named = nl.GetLeader()
			}
		}
		if named != "leader:7946" {
			t.Errorf("the refusal's detail names leader %q, want leader:7946", named)
		}
	})
}

// The Claim and Release rules on their own, for the drivers the gRPC
// tests do not each go through: what each writes and refuses.
func TestClaimAndReleaseRules(t *testing.T) {
	t.Parallel()
	bound := func(v *legion.Volume, node string) *legion.Volume {
		v.Status.Node, v.Status.Backend = node, "b-"+node
		return v
	}
	for _, c := range []struct {
		name        string
		v           *legion.Volume
		node        string
		release     bool
		write       bool
		refused     string
		node2, back string // the status after
	}{
		{name: "zfs free", v: zfsVolume("s", "v"), node: "n1", write: true, node2: "n1", back: "b"},
		{name: "zfs held", v: bound(zfsVolume("s", "v"), "n2"), node: "n1", refused: "held by node n2", node2: "n2", back: "b-n2"},
		{name: "zfs release", v: bound(zfsVolume("s", "v"), "n1"), node: "n1", release: true, node2: "n1", back: "b-n1"},
		{name: "iscsi release", v: bound(iscsiVolume("s", "v"), "n1"), node: "n1", release: true, write: true},
		{name: "iscsi release by another", v: bound(iscsiVolume("s", "v"), "n2"), node: "n1", release: true, node2: "n2", back: "b-n2"},
		{name: "plugin shared", v: pluginVolume("s", "v", true), node: "n1"},
		{name: "nfs release", v: nfsVolume("s", "v"), node: "n1", release: true},
		{name: "iscsi ignores spec node", v: func() *legion.Volume { v := iscsiVolume("s", "v"); v.Spec.Node = "n2"; return v }(), node: "n1", write: true, node2: "n1", back: "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var write bool
			var err error
			if c.release {
				write = dispatcher.Release(c.v, c.node)
			} else {
				write, err = dispatcher.Claim(c.v, c.node, "b", nil)
			}
			if c.refused != "" {
				refused(t, c.name, err, codes.FailedPrecondition, c.refused)
			} else if err != nil {
				t.Fatal(err)
			}
			if write != c.write || c.v.Status.Node != c.node2 || c.v.Status.Backend != c.back {
				t.Errorf("write %v, status %+v; want write %v, node %q, backend %q", write, c.v.Status, c.write, c.node2, c.back)
			}
		})
	}
}

func volumesOf(t *testing.T, set *legionpb.AssignmentSet) []string {
	t.Helper()
	var out []string
	for _, raw := range set.GetVolumes() {
		o, err := legion.FromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		v := o.(*legion.Volume)
		out = append(out, v.Metadata.Namespace+"/"+v.Metadata.Name+"@"+v.Status.Node+":"+v.Status.Backend)
	}
	return out
}

// A node's set carries exactly the Volumes its tasks mount (in their
// namespace), those bound to it and those moving from or to it, and a new
// set follows a change of one of them; a change to another node's Volume
// sends nothing.
func TestAssignmentsCarryTheNodesVolumes(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	bound := func(v *legion.Volume, node string, mig *legion.VolumeMigration) *legion.Volume {
		v.Status = legion.VolumeStatus{Node: node, Backend: "zfs", Migration: mig}
		return v
	}
	for _, v := range []*legion.Volume{
		zfsVolume("shop", "mounted"),
		nfsVolume("web", "mounted"), // same name, another namespace: mounted by a web task
		zfsVolume("web", "not-mounted"),
		bound(zfsVolume("shop", "held"), "node-a", nil),
		bound(zfsVolume("shop", "incoming"), "node-b", &legion.VolumeMigration{State: legion.MigrationCopying, From: "node-b", To: "node-a"}),
		bound(zfsVolume("shop", "outgoing"), "node-a", &legion.VolumeMigration{State: legion.MigrationCopied, From: "node-a", To: "node-c"}),
		bound(zfsVolume("shop", "elsewhere"), "node-b", nil),
		bound(zfsVolume("shop", "passing"), "node-b", &legion.VolumeMigration{State: legion.MigrationCopying, From: "node-b", To: "node-c"}),
	} {
		putVolume(t, m.Store, v)
	}
	put(t, m.Store, mounting("shop", "db-0", "node-a", "mounted"))
	put(t, m.Store, mounting("web", "files-0", "node-a", "mounted"))
	put(t, m.Store, mounting("shop", "gone-0", "node-a", "deleted")) // its Volume does not exist
	put(t, m.Store, mounting("shop", "db-1", "node-b", "elsewhere"))
	a := claimer(t, m, "node-a")
	s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"shop/held@node-a:zfs", "shop/incoming@node-b:zfs", "shop/mounted@:", "shop/outgoing@node-a:zfs", "web/mounted@:"}
	if diff := cmp.Diff(want, volumesOf(t, recv(t, s))); diff != "" {
		t.Fatalf("first set's volumes (-want +got):\n%s", diff)
	}

	// node-b's Volume changes (no new set), then node-a claims the one its
	// task mounts (a new set with the binding).
	v := getVolume(t, m.Store, "shop", "elsewhere")
	v.Status.Backend = "zfs dataset tank/b"
	if _, err := m.Store.PutStatus(context.Background(), v, store.Precondition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := claim(t, a, "shop", "mounted", "db-0", "directory /d"); err != nil {
		t.Fatal(err)
	}
	want[2] = "shop/mounted@node-a:directory /d"
	if diff := cmp.Diff(want, volumesOf(t, recv(t, s))); diff != "" {
		t.Fatalf("after node-a's claim (-want +got):\n%s", diff)
	}
	// A Volume bound to another node moves to node-a: it joins the set.
	v = getVolume(t, m.Store, "shop", "passing")
	v.Status.Migration.To = "node-a"
	if _, err := m.Store.PutStatus(context.Background(), v, store.Precondition{}); err != nil {
		t.Fatal(err)
	}
	want = []string{want[0], want[1], want[2], want[3], "shop/passing@node-b:zfs", want[4]}
	if diff := cmp.Diff(want, volumesOf(t, recv(t, s))); diff != "" {
		t.Fatalf("after a move to node-a (-want +got):\n%s", diff)
	}
}
