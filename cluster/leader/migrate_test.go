package leader

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// moveCall is one call the migrator made of the mover.
type moveCall struct {
	From, To string
	Send     *legionpb.VolumeSendOffer
	Recv     *legionpb.VolumeReceiveOffer
	Drop     *legionpb.VolumeDropOffer // a DropVolume call, on From
}

// fakeMover records calls and answers each with what its hook says (nil:
// success). The hook runs outside the lock, so it may block.
type fakeMover struct {
	mu    sync.Mutex
	calls []moveCall
	hook  func(ctx context.Context, c moveCall) error
}

func (f *fakeMover) answer(ctx context.Context, c moveCall) error {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	hook := f.hook
	f.mu.Unlock()
	if hook == nil {
		return nil
	}
	return hook(ctx, c)
}

func (f *fakeMover) CopyVolume(ctx context.Context, from, to string, send *legionpb.VolumeSendOffer, recv *legionpb.VolumeReceiveOffer) error {
	return f.answer(ctx, moveCall{From: from, To: to, Send: send, Recv: recv})
}

func (f *fakeMover) DropVolume(ctx context.Context, node string, drop *legionpb.VolumeDropOffer) error {
	return f.answer(ctx, moveCall{From: node, Drop: drop})
}

func (f *fakeMover) setHook(h func(ctx context.Context, c moveCall) error) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func (f *fakeMover) recorded() []moveCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]moveCall(nil), f.calls...)
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// migrationFixture is a store holding Volumes and a migrator over it with
// a fake mover and clock, run until the test ends (or stop is called).
type migrationFixture struct {
	t     *testing.T
	st    *store.Store
	mover *fakeMover
	clock *fakeClock
	stop  func() error // ends Run and returns what it returned
}

// startMigrator stores vols and runs a migrator over them whose mover
// answers with hook from the first call on.
func startMigrator(t *testing.T, hook func(context.Context, moveCall) error, vols ...*legion.Volume) *migrationFixture {
	t.Helper()
	f := &migrationFixture{t: t, st: dispatchertest.OpenStore(t), mover: &fakeMover{hook: hook},
		clock: &fakeClock{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}}
	for _, v := range vols {
		if _, _, err := f.st.Put(context.Background(), v, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var once sync.Once
	var runErr error
	f.stop = func() error {
		once.Do(func() { cancel(); runErr = <-done })
		return runErr
	}
	t.Cleanup(func() { f.stop() })
	m := &Migrator{Store: f.st, Mover: f.mover, Now: f.clock.Now, Resync: 10 * time.Millisecond}
	go func() { done <- m.Run(ctx) }()
	return f
}

func (f *migrationFixture) volume(name string) *legion.Volume {
	f.t.Helper()
	o, _, err := f.st.Get(legion.KindVolume, "shop", name)
	if err != nil {
		f.t.Fatal(err)
	}
	return o.(*legion.Volume)
}

// setMigration writes the migration as the planner would.
func (f *migrationFixture) setMigration(name string, change func(*legion.VolumeStatus)) {
	f.t.Helper()
	for {
		v := f.volume(name)
		change(&v.Status)
		_, err := f.st.PutStatus(context.Background(), v, store.Precondition{Version: v.Metadata.Version})
		if err == nil {
			return
		}
		if !errors.Is(err, store.ErrConflict) {
			f.t.Fatal(err)
		}
	}
}

func (f *migrationFixture) waitFor(what string, cond func() bool) {
	f.t.Helper()
	dispatchertest.Poll(f.t, what, 10*time.Second, cond)
}

func (f *migrationFixture) migration(name string) legion.VolumeMigration {
	if m := f.volume(name).Status.Migration; m != nil {
		return *m
	}
	return legion.VolumeMigration{}
}

// movingVolume is a ZFS Volume of namespace shop held by w1 and recorded
// copying to w2.
func movingVolume(name string) *legion.Volume {
	return &legion.Volume{
		Header: legion.Header{APIVersion: "legion/v1", Kind: legion.KindVolume, Metadata: legion.Metadata{Name: name, Namespace: "shop"}},
		Spec:   legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 30},
		Status: legion.VolumeStatus{Node: "w1", Backend: "zfs dataset tank/legion/volumes/shop/" + name,
			Migration: &legion.VolumeMigration{State: legion.MigrationCopying, From: "w1", To: "w2"}, Snapshots: []string{"legion-update-2"}},
	}
}

var ignorePB = protocmp.Transform()

// A migration goes the whole way: the full copy from w1 to w2 while
// copying, marked copied; once finishing, the last part onto that full
// copy, the Volume bound to w2 (its backend left to w2's claim), and w1
// told to drop its copy.
func TestMigratorCopiesThenFinishes(t *testing.T) {
	t.Parallel()
	f := startMigrator(t, nil, movingVolume("db"))
	f.waitFor("copied", func() bool { return f.migration("db").State == legion.MigrationCopied })
	v := f.volume("db")
	if m := v.Status.Migration; m.From != "w1" || m.To != "w2" || m.Attempt != 0 || m.NextAttempt != nil || m.Message != "" {
		t.Fatalf("copied migration %+v", m)
	}
	if v.Status.Node != "w1" {
		t.Fatalf("copied: node %q, want the data still on w1", v.Status.Node)
	}
	calls := f.mover.recorded()
	if len(calls) != 1 {
		t.Fatalf("calls while copying: %+v, want the full copy only", calls)
	}
	full := calls[0].Send.GetSnapshot()
	if !strings.HasPrefix(full, "legion-move-") || !strings.HasSuffix(full, "-full") {
		t.Fatalf("full copy's snapshot %q, want legion-move-<key>-full", full)
	}
	spec, _ := json.Marshal(v.Spec)
	want := moveCall{From: "w1", To: "w2",
		Send: &legionpb.VolumeSendOffer{Namespace: "shop", Volume: "db", VolumeUid: v.Metadata.UID, Snapshot: full},
		Recv: &legionpb.VolumeReceiveOffer{Namespace: "shop", Volume: "db", VolumeUid: v.Metadata.UID, Spec: spec}}
	if d := cmp.Diff(want, calls[0], ignorePB); d != "" {
		t.Fatalf("full copy (-want +got):\n%s", d)
	}

	f.setMigration("db", func(s *legion.VolumeStatus) { s.Migration.State = legion.MigrationFinishing })
	f.waitFor("bound to w2", func() bool { return f.volume("db").Status.Migration == nil })
	v = f.volume("db")
	if v.Status.Node != "w2" || v.Status.Backend != "" || v.Status.Snapshots != nil || v.State() != legion.VolumeBound {
		t.Fatalf("after the move: node %q backend %q snapshots %q state %s, want bound to w2 with the backend and snapshots left to its claim",
			v.Status.Node, v.Status.Backend, v.Status.Snapshots, v.State())
	}
	f.waitFor("drop sent", func() bool { return len(f.mover.recorded()) == 3 })
	last := strings.TrimSuffix(full, "-full") + "-last"
	wantRest := []moveCall{
		{From: "w1", To: "w2",
			Send: &legionpb.VolumeSendOffer{Namespace: "shop", Volume: "db", VolumeUid: v.Metadata.UID, Snapshot: last, From: full},
			Recv: &legionpb.VolumeReceiveOffer{Namespace: "shop", Volume: "db", VolumeUid: v.Metadata.UID, Incremental: true, Spec: spec}},
		{From: "w1", Drop: &legionpb.VolumeDropOffer{Namespace: "shop", Volume: "db", VolumeUid: v.Metadata.UID}},
	}
	if d := cmp.Diff(wantRest, f.mover.recorded()[1:], ignorePB); d != "" {
		t.Fatalf("finishing (-want +got):\n%s", d)
	}
	if err := f.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// The wait after a failure starts at 5 s and doubles per failure in a
// row, up to 5 minutes.
func TestMigrationBackoff(t *testing.T) {
	t.Parallel()
	var got []time.Duration
	for n := 1; n <= 9; n++ {
		got = append(got, MigrationBackoff(n))
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("backoff (-want +got):\n%s", d)
	}
}

// A failed full copy is noted in the migration (the attempt's number in
// a row, when the next starts, the error) and tried again only once that
// time has come, each wait twice the last; a success clears them.
func TestMigratorRecordsFailedAttempts(t *testing.T) {
	t.Parallel()
	f := startMigrator(t, func(context.Context, moveCall) error { return errors.New("out of space on w2") }, movingVolume("db"))
	for attempt, wait := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second} {
		f.waitFor("attempt recorded", func() bool { return f.migration("db").Attempt == attempt+1 })
		m := f.migration("db")
		if m.State != legion.MigrationCopying || !strings.Contains(m.Message, "out of space on w2") {
			t.Fatalf("after failure %d: %+v, want still copying with the error", attempt+1, m)
		}
		if want := f.clock.Now().Add(wait); m.NextAttempt == nil || !m.NextAttempt.Equal(want) {
			t.Fatalf("after failure %d: next attempt %v, want %v (a wait of %s)", attempt+1, m.NextAttempt, want, wait)
		}
		if n := len(f.mover.recorded()); n != attempt+1 {
			t.Fatalf("after failure %d: %d transfers, want one per attempt", attempt+1, n)
		}
		f.clock.Add(wait)
	}
	f.mover.setHook(nil)
	f.waitFor("copied", func() bool { return f.migration("db").State == legion.MigrationCopied })
	if m := f.migration("db"); m.Attempt != 0 || m.NextAttempt != nil || m.Message != "" {
		t.Fatalf("after a success: %+v, want the failures cleared", m)
	}
	calls := f.mover.recorded()
	for _, c := range calls[1:] {
		if c.Send.GetSnapshot() != calls[0].Send.GetSnapshot() {
			t.Fatalf("attempts sent %q then %q: a retry of one migration keeps its snapshot", calls[0].Send.GetSnapshot(), c.Send.GetSnapshot())
		}
	}
}

// A failed last part leaves the migration finishing with the failure
// noted; the next attempt sends the last part again onto the same full
// copy.
func TestMigratorSendsLastPartAgain(t *testing.T) {
	t.Parallel()
	f := startMigrator(t, nil, movingVolume("db"))
	f.waitFor("copied", func() bool { return f.migration("db").State == legion.MigrationCopied })
	f.mover.setHook(func(_ context.Context, c moveCall) error {
		if c.Recv.GetIncremental() {
			return errors.New("the transfer was cut short: w2 went away")
		}
		return nil
	})
	f.setMigration("db", func(s *legion.VolumeStatus) { s.Migration.State = legion.MigrationFinishing })
	f.waitFor("failure recorded", func() bool { return f.migration("db").Attempt == 1 })
	if m := f.migration("db"); m.State != legion.MigrationFinishing || !strings.Contains(m.Message, "cut short") {
		t.Fatalf("after a failed last part: %+v, want still finishing with the error", m)
	}
	f.mover.setHook(nil)
	f.clock.Add(MigrationRetryFirst)
	f.waitFor("bound to w2", func() bool { return f.volume("db").Status.Node == "w2" })
	calls := f.mover.recorded()
	if len(calls) < 3 {
		t.Fatalf("calls %+v", calls)
	}
	full := calls[0].Send.GetSnapshot()
	for _, c := range calls[1:3] {
		if !c.Recv.GetIncremental() || c.Send.GetFrom() != full || c.Send.GetSnapshot() != calls[1].Send.GetSnapshot() {
			t.Fatalf("last part sent as %+v, want the same increment onto %s each time", c.Send, full)
		}
	}
}

// A new leader finding a migration finishing does not know the full
// copy's snapshot, so it sends a full copy again before the last part.
func TestMigratorFinishesWithoutKnownFullCopy(t *testing.T) {
	t.Parallel()
	v := movingVolume("db")
	v.Status.Migration.State = legion.MigrationFinishing
	f := startMigrator(t, nil, v)
	f.waitFor("bound to w2", func() bool { return f.volume("db").Status.Node == "w2" })
	calls := f.mover.recorded()
	if len(calls) < 2 || calls[0].Recv.GetIncremental() || calls[0].Send.GetFrom() != "" ||
		!calls[1].Recv.GetIncremental() || calls[1].Send.GetFrom() != calls[0].Send.GetSnapshot() {
		t.Fatalf("calls %+v, want a full copy then the last part onto it", calls)
	}
}

// A migration the planner retargets while its full copy is under way is
// not overwritten by that copy's result, and the new one gets snapshots
// of its own; a change that leaves the migration as it was does not undo
// the copy.
func TestMigratorLeavesChangedMigration(t *testing.T) {
	t.Parallel()
	release := map[string]chan struct{}{"w2": make(chan struct{}), "w3": make(chan struct{})}
	f := startMigrator(t, func(ctx context.Context, c moveCall) error {
		select {
		case <-release[c.To]:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, movingVolume("db"), movingVolume("logs"))
	copies := func(vol, to string) []moveCall {
		var out []moveCall
		for _, c := range f.mover.recorded() {
			if c.Send.GetVolume() == vol && c.To == to {
				out = append(out, c)
			}
		}
		return out
	}
	f.waitFor("both copies started", func() bool { return len(copies("db", "w2")) == 1 && len(copies("logs", "w2")) == 1 })
	f.setMigration("db", func(s *legion.VolumeStatus) { s.Migration.To = "w3" })
	f.setMigration("logs", func(s *legion.VolumeStatus) { s.Message = "unrelated" })
	close(release["w2"])
	f.waitFor("logs copied", func() bool { return f.migration("logs").State == legion.MigrationCopied })
	f.waitFor("copy to w3 started", func() bool { return len(copies("db", "w3")) == 1 })
	if m := f.migration("db"); m.State != legion.MigrationCopying || m.To != "w3" {
		t.Fatalf("retargeted migration now %+v, want copying to w3", m)
	}
	if a, b := copies("db", "w2")[0].Send.GetSnapshot(), copies("db", "w3")[0].Send.GetSnapshot(); a == b {
		t.Fatalf("the new migration reuses the old one's snapshot %s", a)
	}
	close(release["w3"])
	f.waitFor("copied to w3", func() bool { return f.migration("db").State == legion.MigrationCopied })
}

// Losing the leadership cancels the transfers under way and records
// nothing: the next leader starts over from the recorded state.
func TestMigratorStopsWithLeadership(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{})
	var once sync.Once
	f := startMigrator(t, func(ctx context.Context, _ moveCall) error {
		<-ctx.Done()
		once.Do(func() { close(cancelled) })
		return ctx.Err()
	}, movingVolume("db"))
	f.waitFor("copy started", func() bool { return len(f.mover.recorded()) == 1 })
	before := f.volume("db").Metadata.Version
	if err := f.stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	select {
	case <-cancelled:
	default:
		t.Fatal("Run returned with its transfer still running")
	}
	if v := f.volume("db"); v.Metadata.Version != before || v.Status.Migration.Attempt != 0 {
		t.Fatalf("a cancelled transfer wrote %+v", v.Status.Migration)
	}
}

// At most MigrationTransfers Volumes move at once, and all of them move.
func TestMigratorBoundsTransfers(t *testing.T) {
	t.Parallel()
	var vols []*legion.Volume
	for _, n := range []string{"a", "b", "c", "d", "e", "f"} {
		vols = append(vols, movingVolume(n))
	}
	var mu sync.Mutex
	running, most := 0, 0
	release := make(chan struct{})
	f := startMigrator(t, func(ctx context.Context, _ moveCall) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, vols...)
	f.waitFor("the bound reached", func() bool { mu.Lock(); defer mu.Unlock(); return running == MigrationTransfers })
	close(release)
	f.waitFor("all copied", func() bool {
		for _, v := range vols {
			if f.migration(v.Metadata.Name).State != legion.MigrationCopied {
				return false
			}
		}
		return true
	})
	if most != MigrationTransfers {
		t.Fatalf("%d transfers at once, want at most %d", most, MigrationTransfers)
	}
	if n := len(f.mover.recorded()); n != len(vols) {
		t.Fatalf("%d transfers for %d Volumes, want one each", n, len(vols))
	}
}

// A failed drop of the old copy is tried again after the backoff, and
// given up once the Volume's data is wanted on that node again.
func TestMigratorRetriesDrop(t *testing.T) {
	t.Parallel()
	v := movingVolume("db")
	v.Status.Migration.State = legion.MigrationFinishing
	f := startMigrator(t, func(_ context.Context, c moveCall) error {
		if c.Drop != nil {
			return errors.New("node w1 is unreachable")
		}
		return nil
	}, v)
	drops := func() int {
		n := 0
		for _, c := range f.mover.recorded() {
			if c.Drop != nil {
				n++
			}
		}
		return n
	}
	f.waitFor("first drop", func() bool { return drops() == 1 })
	f.mover.setHook(nil)
	f.clock.Add(MigrationRetryFirst)
	f.waitFor("drop tried again", func() bool { return drops() == 2 })
}

// A drop still to retry is given up once the Volume moves back to that
// node: destroying it there would lose the data on its way in.
func TestMigratorForgetsDropWhenMovingBack(t *testing.T) {
	t.Parallel()
	v := movingVolume("db")
	v.Status.Migration.State = legion.MigrationFinishing
	f := startMigrator(t, func(_ context.Context, c moveCall) error {
		if c.Drop != nil {
			return errors.New("node w1 is unreachable")
		}
		if c.To == "w1" {
			return errors.New("out of space on w1")
		}
		return nil
	}, v)
	drops := func() int {
		n := 0
		for _, c := range f.mover.recorded() {
			if c.Drop != nil {
				n++
			}
		}
		return n
	}
	f.waitFor("first drop", func() bool { return drops() == 1 })
	f.setMigration("db", func(s *legion.VolumeStatus) {
		s.Migration = &legion.VolumeMigration{State: legion.MigrationCopying, From: "w2", To: "w1"}
	})
	f.waitFor("move back failed once", func() bool { return f.migration("db").Attempt == 1 })
	f.clock.Add(MigrationRetryFirst)
	f.waitFor("move back failed again", func() bool { return f.migration("db").Attempt == 2 })
	if n := drops(); n != 1 {
		t.Fatalf("%d drops on w1, want none after the Volume started moving back to it", n)
	}
}

// The leader's tasks include the migrator when given a mover, working
// over the store the other tasks use, and leave it out without one.
func TestTasksRunMigratorGivenMover(t *testing.T) {
	t.Parallel()
	st := dispatchertest.OpenStore(t)
	if _, _, err := st.Put(context.Background(), movingVolume("db"), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	find := func(tasks []Task) *Task {
		for i := range tasks {
			if tasks[i].Name == "volume migrator" {
				return &tasks[i]
			}
		}
		return nil
	}
	if find(Tasks(st, Options{})) != nil {
		t.Fatal("a migrator runs with no mover to move data")
	}
	mover := &fakeMover{}
	task := find(Tasks(st, Options{Mover: mover}))
	if task == nil {
		t.Fatal("no migrator among the leader's tasks")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() { cancel(); <-done })
	go func() { done <- task.Run(ctx) }()
	dispatchertest.Poll(t, "copied", 10*time.Second, func() bool {
		o, _, err := st.Get(legion.KindVolume, "shop", "db")
		return err == nil && o.(*legion.Volume).Status.Migration != nil && o.(*legion.Volume).Status.Migration.State == legion.MigrationCopied
	})
	if n := len(mover.recorded()); n != 1 {
		t.Fatalf("%d transfers, want the full copy", n)
	}
}
