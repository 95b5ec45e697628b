package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/leakcheck"
	"github.com/legionbsd/legion/internal/testpoll"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	leakcheck.Main(m,
		// Opening a damaged store file can leave bbolt's free-page scan
		// stuck reporting its second finding (it panics on the first,
		// which openBolt turns into the refusal); a refused daemon exits.
		goleak.IgnoreAnyFunction("go.etcd.io/bbolt.(*DB).freepages.func2"))
}

type node struct {
	id, dir string
	tr      *raft.InmemTransport
	s       *Store
	// screened wraps tr when the node was opened with openNodeScreened.
	screened *screenedInmem
}

func openNode(t testing.TB, id, dir string) *node {
	t.Helper()
	return openNodeTiming(t, id, dir, FastTiming())
}

func openNodeTiming(t testing.TB, id, dir string, timing Timing) *node {
	t.Helper()
	return openNodeKey(t, id, dir, timing, nil)
}

// openNodeKey opens a node whose values are sealed under key (nil: in
// the clear).
func openNodeKey(t testing.TB, id, dir string, timing Timing, key []byte) *node {
	t.Helper()
	return openNodeOver(t, id, dir, timing, key, false)
}

// openNodeOver opens a node over raft's in-memory transport, through a
// screenedInmem when screened.
func openNodeOver(t testing.TB, id, dir string, timing Timing, key []byte, screened bool) *node {
	t.Helper()
	_, tr := raft.NewInmemTransport(raft.ServerAddress(id))
	n := &node{id: id, dir: dir, tr: tr}
	var trans raft.Transport = tr
	if screened {
		n.screened = newScreenedInmem(tr)
		trans = n.screened
	}
	// Writes of entries near MaxEntry under -race on a loaded machine take
	// seconds; tests that want a write to time out set their own.
	s, err := Open(Config{Dir: dir, ID: id, Transport: trans, Timing: timing, WriteTimeout: 10 * time.Second, Key: key})
	if err != nil {
		if n.screened != nil {
			n.screened.Close()
		}
		t.Fatalf("open %s: %v", id, err)
	}
	n.s = s
	return n
}

// leaderIn opens m1 in dir, bootstraps it alone and waits until it
// leads.
func leaderIn(t *testing.T, dir string) *node {
	t.Helper()
	n := openNode(t, "m1", dir)
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	return n
}

// putConfigs writes the Configs c0 to c<count-1> of the default namespace.
func putConfigs(t *testing.T, n *node, count int) {
	t.Helper()
	for i := range count {
		if _, _, err := n.s.Put(context.Background(), config("default", fmt.Sprint("c", i), "x"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, d, 5*time.Millisecond, cond)
}

// single is one manager leading alone, closed when the test ends.
func single(t testing.TB) *node {
	t.Helper()
	n := openNode(t, "m1", t.TempDir())
	if err := n.s.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, n.s.IsLeader)
	t.Cleanup(func() { n.s.Close() })
	return n
}

func config(ns, name, text string) *legion.Config {
	o, _ := legion.New(legion.KindConfig)
	c := o.(*legion.Config)
	c.Metadata.Name, c.Metadata.Namespace = name, ns
	c.Spec.Data = []byte(text)
	return c
}

func volume(ns, name, size string) *legion.Volume {
	o, _ := legion.New(legion.KindVolume)
	v := o.(*legion.Volume)
	v.Metadata.Name, v.Metadata.Namespace = name, ns
	v.Metadata.Labels = map[string]string{"size": size}
	return v
}

func TestWritesSetVersionUIDAndGeneration(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	a, prev, err := n.s.Put(ctx, config("default", "a", "one"), WriteOptions{Precondition: Precondition{MustNotExist: true}})
	if err != nil || prev != nil {
		t.Fatalf("create: %v (prev %v)", err, prev)
	}
	m := a.GetMetadata()
	if m.Version == 0 || m.Generation != 1 || m.UID != uidFromIndex(m.Version) {
		t.Fatalf("created metadata %+v", m)
	}
	if _, _, err := n.s.Put(ctx, config("default", "a", "one"), WriteOptions{Precondition: Precondition{MustNotExist: true}}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	// Labels only: same generation.
	c := config("default", "a", "one")
	c.Metadata.Labels = map[string]string{"x": "y"}
	b, _, err := n.s.Put(ctx, c, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.GetMetadata(); got.Generation != 1 || got.Version <= m.Version || got.UID != m.UID {
		t.Fatalf("label change metadata %+v (was %+v)", got, m)
	}
	// Spec change: generation 2.
	d, _, err := n.s.Put(ctx, config("default", "a", "two"), WriteOptions{Precondition: Precondition{Version: b.GetMetadata().Version}})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetMetadata().Generation != 2 {
		t.Fatalf("spec change generation %d, want 2", d.GetMetadata().Generation)
	}
	if _, _, err := n.s.Put(ctx, config("default", "a", "three"), WriteOptions{Precondition: Precondition{Version: b.GetMetadata().Version}}); !errors.Is(err, ErrConflict) {
		t.Fatalf("stale version: %v, want ErrConflict", err)
	}
	got, at, err := n.s.Get(legion.KindConfig, "default", "a")
	if err != nil {
		t.Fatal(err)
	}
	if at < d.GetMetadata().Version || string(got.(*legion.Config).Spec.Data) != "two" {
		t.Fatalf("get: %+v at %d", got, at)
	}
	del, err := n.s.Delete(ctx, legion.KindConfig, "default", "a", Precondition{})
	if err != nil || del.GetMetadata().Name != "a" {
		t.Fatalf("delete: %v %v", del, err)
	}
	if _, _, err := n.s.Get(legion.KindConfig, "default", "a"); !errors.Is(err, ErrNotFound) || err.Error() != "Config default/a: not found" {
		t.Fatalf("get after delete: %v, want ErrNotFound as \"Config default/a: not found\"", err)
	}
	if _, _, err := n.s.Get(legion.KindNamespace, "", "none"); !errors.Is(err, ErrNotFound) || err.Error() != "Namespace none: not found" {
		t.Fatalf("get of a missing namespace: %v, want ErrNotFound as \"Namespace none: not found\"", err)
	}
	if _, err := n.s.Delete(ctx, legion.KindConfig, "default", "a", Precondition{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func TestStatusWritesKeepSpec(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	v := volume("default", "data", "1")
	v.Spec.Size = 1 << 30
	created, _, err := n.s.Put(ctx, v, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := volume("default", "data", "ignored")
	st.Spec.Size = 999 << 30
	st.Status.Node = "n1"
	got, err := n.s.PutStatus(ctx, st, Precondition{})
	if err != nil {
		t.Fatal(err)
	}
	gv := got.(*legion.Volume)
	if gv.Spec.Size != 1<<30 || gv.Status.Node != "n1" || gv.Metadata.Generation != 1 || gv.Metadata.Labels["size"] != "1" {
		t.Fatalf("status write changed more than status: %+v", gv)
	}
	// A put with KeepStatus keeps the status and bumps the generation.
	v2 := volume("default", "data", "1")
	v2.Spec.Size = 2 << 30
	out, _, err := n.s.Put(ctx, v2, WriteOptions{KeepStatus: true})
	if err != nil {
		t.Fatal(err)
	}
	ov := out.(*legion.Volume)
	if ov.Status.Node != "n1" || ov.Metadata.Generation != 2 || ov.Metadata.UID != created.GetMetadata().UID {
		t.Fatalf("keep-status put: %+v", ov)
	}
}

func TestListAndWatchHaveNoGapNoDuplicate(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	for i := range 5 {
		if _, _, err := n.s.Put(ctx, config("ns1", fmt.Sprint("c", i), "x"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := n.s.Put(ctx, config("ns2", "other", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	objs, at, err := n.s.List(legion.KindConfig, "ns1", nil)
	if err != nil || len(objs) != 5 {
		t.Fatalf("list ns1: %d objects, %v", len(objs), err)
	}
	all, _, _ := n.s.List(legion.KindConfig, "", nil)
	if len(all) != 6 {
		t.Fatalf("list all namespaces: %d, want 6", len(all))
	}
	w, err := n.s.Watch(at)
	if err != nil {
		t.Fatal(err)
	}
	// Writers race the watcher: it must see each write once, in order.
	want := []uint64{}
	for i := range 20 {
		o, _, err := n.s.Put(ctx, config("ns1", fmt.Sprint("w", i), "x"), WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, o.GetMetadata().Version)
	}
	var got []uint64
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for len(got) < len(want) {
		e, err := w.Next(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if e.Type != Added || e.Version != e.Object.GetMetadata().Version {
			t.Fatalf("event %+v", e)
		}
		got = append(got, e.Version)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("watched versions (-want +got):\n%s", diff)
	}
}

func TestWatchCompactedBeyondHistory(t *testing.T) {
	t.Parallel()
	// A short history: compaction is the same at any size.
	const size = 64
	n := &node{id: "m1", dir: t.TempDir()}
	_, n.tr = raft.NewInmemTransport("m1")
	st, err := Open(Config{Dir: n.dir, ID: "m1", Transport: n.tr, Timing: FastTiming(), HistorySize: size})
	if err != nil {
		t.Fatal(err)
	}
	n.s = st
	defer st.Close()
	if err := st.Bootstrap("m1"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, st.IsLeader)
	ctx := context.Background()
	if _, _, err := n.s.Put(ctx, config("ns", "first", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := n.s.AppliedIndex()
	w, err := n.s.Watch(start)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := n.s.Watch(start, legion.KindSecret)
	if err != nil {
		t.Fatal(err)
	}
	// Write concurrently so raft batches; HistorySize+10 events.
	errs := make(chan error, 8)
	for g := range 8 {
		go func() {
			for i := range (size + 16) / 8 {
				if _, _, err := n.s.Put(ctx, config("ns", fmt.Sprintf("c%d-%d", g, i), "x"), WriteOptions{}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Next(ctx); !errors.Is(err, ErrCompacted) {
		t.Fatalf("watch behind the history: %v, want ErrCompacted", err)
	}
	if _, err := n.s.Watch(start); !errors.Is(err, ErrCompacted) {
		t.Fatalf("new watch from an old version: %v, want ErrCompacted", err)
	}
	if _, err := n.s.Watch(n.s.AppliedIndex()); err != nil {
		t.Fatalf("watch from now: %v", err)
	}
	// Only Configs left the history: a watch of Secrets lost nothing.
	if _, err := n.s.Watch(start, legion.KindConfig); !errors.Is(err, ErrCompacted) {
		t.Fatalf("new watch of Configs from an old version: %v, want ErrCompacted", err)
	}
	if _, err := n.s.Watch(start, legion.KindSecret); err != nil {
		t.Fatalf("new watch of Secrets from an old version, past Configs only: %v", err)
	}
	sec, _ := legion.New(legion.KindSecret)
	sec.GetMetadata().Name, sec.GetMetadata().Namespace = "s", "ns"
	sec.(*legion.Secret).Spec.Data = []byte("v")
	if _, _, err := n.s.Put(ctx, sec, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev, err := secrets.Next(ctx)
	if err != nil || ev.Object.GetKind() != legion.KindSecret {
		t.Fatalf("the watch of Secrets after the Configs: %v, %v; want the Secret", ev.Object, err)
	}
}

func TestRestartServesReadsAndReappliesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := leaderIn(t, dir)
	ctx := context.Background()
	var last uint64
	for i := range 10 {
		o, _, err := n.s.Put(ctx, config("default", fmt.Sprint("c", i), "x"), WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = o.GetMetadata().Version
	}
	if err := n.s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.s.Put(ctx, config("default", "after-snapshot", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.s.Close()

	n2 := openNode(t, "m1", dir)
	defer n2.s.Close()
	// Served at once, before any election.
	objs, at, err := n2.s.List(legion.KindConfig, "default", nil)
	if err != nil || len(objs) != 11 || at <= last {
		t.Fatalf("reads after restart: %d objects at %d, %v", len(objs), at, err)
	}
	w, err := n2.s.Watch(at)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n2.s.Watch(at - 1); !errors.Is(err, ErrCompacted) {
		t.Fatalf("watch from before the restart: %v, want ErrCompacted", err)
	}
	waitFor(t, "leader after restart", 5*time.Second, n2.s.IsLeader)
	o, _, err := n2.s.Put(ctx, config("default", "new", "x"), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o.GetMetadata().Version <= at {
		t.Fatalf("version after restart %d, not above %d", o.GetMetadata().Version, at)
	}
	// The first event after the restart is the new write: nothing old was
	// applied again.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	e, err := w.Next(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if e.Object.GetMetadata().Name != "new" {
		t.Fatalf("first event after restart is %s, want the new write", e.Object.GetMetadata().Name)
	}
}

func TestCloseAndReopen100Times(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 100 {
		_, tr := raft.NewInmemTransport("m1")
		s, err := Open(Config{Dir: dir, ID: "m1", Transport: tr, Timing: FastTiming()})
		if err != nil {
			t.Fatalf("open #%d: %v", i, err)
		}
		if i == 0 {
			if err := s.Bootstrap("m1"); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatalf("close #%d: %v", i, err)
		}
	}
}

func TestSecondOpenOfOneDirectoryIsRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := openNode(t, "m1", dir)
	defer n.s.Close()
	_, tr := raft.NewInmemTransport("m1b")
	_, err := Open(Config{Dir: dir, ID: "m1", Transport: tr, Timing: FastTiming()})
	if err == nil || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("second open: %v", err)
	}
}

// cluster of three in-memory-transport managers.
// closeAtEnd closes the nodes' stores when t ends (before their
// directories go, which were registered first).
func closeAtEnd(t testing.TB, ns []*node) {
	t.Cleanup(func() {
		for _, n := range ns {
			n.s.Close()
		}
	})
}

func threeNodes(t testing.TB) []*node {
	t.Helper()
	return threeNodesTiming(t, FastTiming())
}

func threeNodesTiming(t testing.TB, timing Timing) []*node {
	t.Helper()
	return threeNodesKeys(t, timing, nil)
}

// threeNodesKeys is three managers, m1 leading; keys[i], when given,
// seals node i's values.
func threeNodesKeys(t testing.TB, timing Timing, keys [][]byte) []*node {
	t.Helper()
	var ns []*node
	for i := range 3 {
		var key []byte
		if keys != nil {
			key = keys[i]
		}
		ns = append(ns, openNodeKey(t, fmt.Sprint("m", i+1), t.TempDir(), timing, key))
	}
	formCluster(t, ns)
	return ns
}

// connectAll connects each node's transport to every other's.
func connectAll(ns []*node) {
	for _, a := range ns {
		for _, b := range ns {
			if a != b {
				a.tr.Connect(b.tr.LocalAddr(), b.tr)
			}
		}
	}
}

// formCluster makes ns one cluster that ns[0] leads: connected,
// ns[0] bootstrapped and the others added as voters.
func formCluster(t testing.TB, ns []*node) {
	t.Helper()
	connectAll(ns)
	if err := ns[0].s.Bootstrap(ns[0].id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "leader", 5*time.Second, ns[0].s.IsLeader)
	for _, n := range ns[1:] {
		if err := ns[0].s.Raft().AddVoter(raftID(n.id), raftAddr(n.id), 0, 5*time.Second).Error(); err != nil {
			t.Fatal(err)
		}
	}
	// An addition commits once a majority of the new configuration holds
	// it: the leader and the member added. A replica that has not heard of
	// the last one yet turns away its votes (a test that killed the
	// leader then waited for an election that could not be won).
	waitFor(t, "every replica to hold every voter", 5*time.Second, func() bool {
		for _, n := range ns {
			f := n.s.Raft().GetConfiguration()
			if f.Error() != nil || len(f.Configuration().Servers) != len(ns) {
				return false
			}
		}
		return true
	})
}

func raftID(id string) raft.ServerID        { return raft.ServerID(id) }
func raftAddr(id string) raft.ServerAddress { return raft.ServerAddress(id) }

func leaderOf(t testing.TB, ns []*node) *node {
	t.Helper()
	var l *node
	waitFor(t, "a leader", 10*time.Second, func() bool {
		for _, n := range ns {
			if n.s != nil && n.s.IsLeader() {
				l = n
				return true
			}
		}
		return false
	})
	return l
}

func TestLaggingReplicaCaughtUpBySnapshot(t *testing.T) {
	t.Parallel()
	// Few logs kept after a snapshot, so that 50 writes compact past the
	// cut-off replica and it must take a snapshot to catch up. The
	// leader writes them with one follower: it must not lose the lead
	// meanwhile.
	timing := SteadyTiming()
	timing.TrailingLogs = 10
	ns := threeNodesTiming(t, timing)
	defer func() {
		for _, n := range ns {
			n.s.Close()
		}
	}()
	ctx := context.Background()
	lead := ns[0]
	lag := ns[2]
	if _, _, err := lead.s.Put(ctx, config("default", "first", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "replication", 5*time.Second, func() bool { return lag.s.AppliedIndex() >= lead.s.AppliedIndex() })
	w, err := lag.s.Watch(lag.s.AppliedIndex())
	if err != nil {
		t.Fatal(err)
	}
	// Cut the lagging one off, write past the trailing logs and compact.
	for _, n := range ns[:2] {
		n.tr.Disconnect(raft.ServerAddress(lag.id))
		lag.tr.Disconnect(raft.ServerAddress(n.id))
	}
	for i := range 50 {
		if _, _, err := lead.s.Put(ctx, config("default", fmt.Sprint("c", i), "x"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lead.s.Snapshot(); err != nil {
		t.Fatal(err)
	}
	first, _ := lead.s.logs.FirstIndex()
	if first <= lag.s.AppliedIndex()+1 {
		t.Fatalf("log not compacted past the lagging replica: first %d, it applied %d", first, lag.s.AppliedIndex())
	}
	for _, n := range ns[:2] {
		n.tr.Connect(raft.ServerAddress(lag.id), lag.tr)
		lag.tr.Connect(raft.ServerAddress(n.id), n.tr)
	}
	waitFor(t, "catch up", 10*time.Second, func() bool { return lag.s.AppliedIndex() >= lead.s.AppliedIndex() })
	objs, _, _ := lag.s.List(legion.KindConfig, "default", nil)
	if len(objs) != 51 {
		t.Fatalf("lagging replica holds %d objects, want 51", len(objs))
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := w.Next(wctx); !errors.Is(err, ErrReset) {
		t.Fatalf("watch across a snapshot install: %v, want ErrReset", err)
	}
}

func TestWriteWithoutQuorumGivesUp(t *testing.T) {
	t.Parallel()
	ns := threeNodes(t)
	lead := ns[0]
	for _, n := range ns[1:] {
		n.s.Close()
	}
	defer lead.s.Close()
	s := lead.s
	s.cfg.WriteTimeout = 300 * time.Millisecond // shorter than the leader lease
	_, _, err := s.Put(context.Background(), config("default", "lost", "x"), WriteOptions{})
	if err == nil {
		t.Fatal("write without quorum succeeded")
	}
	if !errors.Is(err, ErrNoQuorum) && !errors.Is(err, ErrNotLeader) {
		t.Fatalf("write without quorum: %v", err)
	}
	if errors.Is(err, ErrNoQuorum) && !strings.Contains(err.Error(), "may still apply") {
		t.Fatalf("error does not say the write may still apply: %v", err)
	}
}

// The object a write returns is the writer's own: changing it changes
// neither what watchers are sent nor what is stored.
func TestWrittenObjectIsTheWritersOwn(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	w, err := n.s.Watch(0)
	if err != nil {
		t.Fatal(err)
	}
	for _, write := range []func() (legion.Object, error){
		func() (legion.Object, error) {
			o, _, err := n.s.Put(ctx, config("default", "a", "one"), WriteOptions{})
			return o, err
		},
		func() (legion.Object, error) {
			return n.s.PutStatus(ctx, volumeWithStatus(t, n), Precondition{})
		},
	} {
		got, err := write()
		if err != nil {
			t.Fatal(err)
		}
		m := got.GetMetadata()
		kind, ns, name, version := got.GetKind(), m.Namespace, m.Name, m.Version
		m.Labels = map[string]string{"changed": "by the writer"}
		m.Name = "changed"
		e := nextEvent(t, w, version)
		if e.Object.GetMetadata().Name != name || e.Object.GetMetadata().Labels["changed"] != "" {
			t.Fatalf("the watchers' %s was changed with the writer's: %+v", kind, e.Object.GetMetadata())
		}
		stored, _, err := n.s.Get(kind, ns, name)
		if err != nil || stored.GetMetadata().Labels["changed"] != "" {
			t.Fatalf("stored %s: %v %+v", kind, err, stored)
		}
	}
}

// volumeWithStatus stores a Volume and returns a status write for it.
func volumeWithStatus(t *testing.T, n *node) legion.Object {
	t.Helper()
	if _, _, err := n.s.Put(context.Background(), volume("default", "data", "1"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	v := volume("default", "data", "1")
	v.Status.Node = "n1"
	return v
}

// nextEvent is the watch's event at version (skipping those before it).
func nextEvent(t *testing.T, w *Watcher, version uint64) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		e, err := w.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for the event at %d: %v", version, err)
		}
		if e.Version == version {
			return e
		}
	}
}

// PutInPlace leaves the written object as the store holds it (metadata,
// and with KeepStatus the stored status), and as it was after a refusal.
func TestPutInPlaceMakesTheObjectWhatWasStored(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	same := func(o legion.Object) {
		t.Helper()
		m := o.GetMetadata()
		stored, _, err := n.s.Get(o.GetKind(), m.Namespace, m.Name)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := legion.MarshalJSON(o)
		want, _ := legion.MarshalJSON(stored)
		if string(got) != string(want) {
			t.Fatalf("after PutInPlace:\n%s\nstored:\n%s", got, want)
		}
	}
	v := volume("default", "data", "1")
	v.Spec.Size = 1 << 30
	if prev, err := n.s.PutInPlace(ctx, v, WriteOptions{Precondition: Precondition{MustNotExist: true}}); err != nil || prev != nil {
		t.Fatalf("create: %v (prev %v)", err, prev)
	}
	if v.Metadata.Version == 0 || v.Metadata.Generation != 1 || v.Metadata.UID != uidFromIndex(v.Metadata.Version) {
		t.Fatalf("created metadata %+v", v.Metadata)
	}
	same(v)
	st := volume("default", "data", "1")
	st.Status.Node = "n1"
	if _, err := n.s.PutStatus(ctx, st, Precondition{}); err != nil {
		t.Fatal(err)
	}
	// A spec change with KeepStatus: the stored status comes back.
	w := volume("default", "data", "2")
	w.Spec.Size = 2 << 30
	prev, err := n.s.PutInPlace(ctx, w, WriteOptions{KeepStatus: true})
	if err != nil || prev == nil || prev.(*legion.Volume).Status.Node != "n1" {
		t.Fatalf("update: %v (prev %+v)", err, prev)
	}
	if w.Status.Node != "n1" || w.Metadata.Generation != 2 || w.Metadata.UID != v.Metadata.UID {
		t.Fatalf("updated in place: %+v %+v", w.Metadata, w.Status)
	}
	same(w)
	// Refused: untouched.
	x := volume("default", "data", "3")
	before, _ := legion.MarshalJSON(x)
	if _, err := n.s.PutInPlace(ctx, x, WriteOptions{Precondition: Precondition{MustNotExist: true}}); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	if after, _ := legion.MarshalJSON(x); string(after) != string(before) {
		t.Fatalf("a refused write changed the object: %s", after)
	}
}
