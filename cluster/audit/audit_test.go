package audit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ev(i int) Event {
	return Event{Time: t0.Add(time.Duration(i) * time.Second), Actor: "alice", Action: ActionApply, Kind: "Config",
		Namespace: "shop", Name: fmt.Sprintf("c%d", i), Outcome: OK, Manager: "m1"}
}

func names(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Name)
	}
	return out
}

// The buffer keeps the newest events up to its limit, and what could not
// be handed on goes back ahead of what came since.
func TestRecorderHoldsTheNewestUpToItsLimit(t *testing.T) {
	t.Parallel()
	r := NewRecorder(3, nil)
	for i := range 5 {
		r.Record(ev(i))
	}
	if got, want := names(r.Take()), []string{"c2", "c3", "c4"}; !cmp.Equal(got, want) {
		t.Fatalf("held %v, want %v", got, want)
	}
	if r.Len() != 0 {
		t.Fatalf("%d held after Take", r.Len())
	}
	r.Record(ev(10))
	r.PutBack([]Event{ev(7), ev(8), ev(9)})
	if got, want := names(r.Take()), []string{"c8", "c9", "c10"}; !cmp.Equal(got, want) {
		t.Fatalf("after PutBack %v, want %v", got, want)
	}
	long := ev(1)
	long.Message = strings.Repeat("é", MaxMessage)
	r.Record(long)
	if m := r.Take()[0].Message; len(m) > MaxMessage+len("…") || !strings.HasSuffix(m, "…") {
		t.Fatalf("a long message kept %d bytes", len(m))
	}
}

// At its limit the recorder drops the oldest event without copying what
// it keeps: a copy of the whole buffer on every Record, under its lock,
// made every API call wait in turn once a burst of writes filled it.
func TestRecorderAtItsLimitDoesNotCopyWhatItKeeps(t *testing.T) {
	r := NewRecorder(DefaultHold, nil)
	for i := range DefaultHold {
		r.Record(ev(i))
	}
	e := ev(DefaultHold)
	// Appending past the slice's end allocates now and then (amortised);
	// a copy per Record would allocate every time.
	if allocs := testing.AllocsPerRun(1000, func() { r.Record(e) }); allocs > 0.1 {
		t.Fatalf("Record at the limit allocates %.2f times a call", allocs)
	}
	held := r.Take()
	if len(held) != DefaultHold || held[len(held)-1].Name != e.Name || held[0].Name != ev(1001).Name {
		t.Fatalf("held %d events, %s to %s", len(held), held[0].Name, held[len(held)-1].Name)
	}
}

// A quarter of the limit held asks for an early flush, once until taken;
// the flusher then writes without waiting for its period.
func TestManyEventsAreFlushedBeforeThePeriodEnds(t *testing.T) {
	t.Parallel()
	r := NewRecorder(8, nil)
	r.Record(ev(0))
	select {
	case <-r.Pressed():
		t.Fatal("one event of 8 asked for a flush")
	default:
	}
	r.Record(ev(1))
	select {
	case <-r.Pressed():
	default:
		t.Fatal("two events of 8 did not ask for a flush")
	}
	r.Take()

	st := dispatchertest.OpenStore(t)
	r = NewRecorder(40, nil)
	f := &Flusher{Recorder: r, Store: func() Leading { return st }, Period: time.Hour,
		Hand: func(context.Context, []Event) error { return errors.New("the leader hands nothing on") }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() { defer close(done); f.Run(ctx) }()
	var want []Event
	for i := range 10 {
		want = append(want, ev(i))
	}
	r.Record(want...)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := Read(st, Filter{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == len(want) {
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("written (-want +got):\n%s", d)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events written within 10 s of a period of an hour", len(got), len(want))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestFilterNarrowsByEachField(t *testing.T) {
	t.Parallel()
	all := []Event{
		{Time: t0, Actor: "alice", Action: "apply", Kind: "Service", Namespace: "shop", Name: "web", Outcome: OK},
		{Time: t0.Add(time.Minute), Actor: "bob", Action: "delete", Kind: "Secret", Namespace: "lab", Name: "pw", Outcome: Denied},
		{Time: t0.Add(2 * time.Minute), Actor: "admin", Action: "exec", Kind: "Task", Namespace: "shop", Name: "web-1", Outcome: Error},
	}
	for _, c := range []struct {
		f    Filter
		want []string
	}{
		{Filter{}, []string{"web", "pw", "web-1"}},
		{Filter{Since: t0.Add(time.Minute)}, []string{"pw", "web-1"}},
		{Filter{Actor: "bob"}, []string{"pw"}},
		{Filter{Action: "exec"}, []string{"web-1"}},
		{Filter{Namespace: "shop"}, []string{"web", "web-1"}},
		{Filter{Kind: "service"}, []string{"web"}},
		{Filter{Denied: true}, []string{"pw"}},
		{Filter{Namespace: "shop", Action: "apply", Actor: "bob"}, nil},
	} {
		if got := names(Select(all, c.f)); !cmp.Equal(got, c.want) {
			t.Errorf("%+v: %v, want %v", c.f, got, c.want)
		}
	}
}

func batchCounts(t *testing.T, st Store) map[string]int {
	t.Helper()
	bs, _, err := batches(st)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, b := range bs {
		out[b.name] = b.count
	}
	return out
}

// A flush on the leader writes one Config in the system namespace per
// round, its count in a label; more than a batch holds goes in parts.
func TestLeaderWritesBatchesWithTheirCount(t *testing.T) {
	t.Parallel()
	st := dispatchertest.OpenStore(t)
	r := NewRecorder(0, nil)
	now := t0
	f := &Flusher{Recorder: r, Store: func() Leading { return st }, Now: func() time.Time { return now },
		Hand: func(context.Context, []Event) error { return errors.New("the leader hands nothing on") }}
	var want []Event
	for i := range batchEvents + 5 {
		want = append(want, ev(i))
	}
	r.Record(want...)
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ms := strconv.FormatInt(t0.UnixMilli(), 10)
	if got, w := batchCounts(t, st), map[string]int{"audit-" + ms + "-0": batchEvents, "audit-" + ms + "-1": 5}; !cmp.Equal(got, w) {
		t.Fatalf("batches %v, want %v", got, w)
	}
	// A second round in the same millisecond takes the next free name.
	r.Record(ev(9999))
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := batchCounts(t, st)["audit-"+ms+"-2"]; got != 1 {
		t.Fatalf("second round: %v", batchCounts(t, st))
	}
	got, err := Read(st, Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(append(want, ev(9999)), got); d != "" {
		t.Fatalf("read back (-want +got):\n%s", d)
	}
	if r.Len() != 0 {
		t.Fatalf("%d events still held", r.Len())
	}
}

// Batches older than the retention go, then the oldest while more events
// are kept than the limit.
func TestRetentionByAgeAndCount(t *testing.T) {
	t.Parallel()
	st := dispatchertest.OpenStore(t)
	ctx := context.Background()
	write := func(at time.Time, n int) {
		evs := make([]Event, n)
		for i := range evs {
			evs[i] = ev(i)
		}
		if _, err := Write(ctx, st, at, evs); err != nil {
			t.Fatal(err)
		}
	}
	day := 24 * time.Hour
	write(t0.Add(-40*day), 1)
	write(t0.Add(-31*day), 2)
	write(t0.Add(-29*day), 3)
	write(t0.Add(-1*day), 4)
	write(t0, 5)
	r := Retention{Age: 30 * day, MaxEvents: 10}
	gone, err := Prune(ctx, st, t0, r)
	if err != nil {
		t.Fatal(err)
	}
	// By age the first two go (12 left), by count the third (9 left).
	want := map[string]int{batchName(t0.Add(-1*day), 0): 4, batchName(t0, 0): 5}
	if got := batchCounts(t, st); gone != 3 || !cmp.Equal(got, want) {
		t.Fatalf("pruned %d, kept %v; want 3 and %v", gone, got, want)
	}
	if gone, err := Prune(ctx, st, t0, r); err != nil || gone != 0 {
		t.Fatalf("second prune: %d, %v", gone, err)
	}
	if !cmp.Equal(r.withDefaults(), r) || (Retention{}).withDefaults() != (Retention{Age: DefaultRetention, MaxEvents: DefaultMaxEvents}) {
		t.Fatalf("defaults: %+v", Retention{}.withDefaults())
	}
}

type follower struct{ Leading }

func (follower) IsLeader() bool { return false }

// A follower hands its events to the leader; what the leader cannot take
// is held for the next round, not lost.
func TestFollowerHandsOnAndHoldsWhatFails(t *testing.T) {
	t.Parallel()
	st := dispatchertest.OpenStore(t)
	r := NewRecorder(0, nil)
	var handed []Event
	fail := true
	f := &Flusher{Recorder: r, Store: func() Leading { return follower{st} }, Hand: func(_ context.Context, evs []Event) error {
		if fail {
			return errors.New("no leader")
		}
		handed = append(handed, evs...)
		return nil
	}}
	r.Record(ev(1), ev(2))
	if err := f.Flush(context.Background()); err == nil {
		t.Fatal("a failed hand-over reported no error")
	}
	r.Record(ev(3))
	if r.Len() != 3 {
		t.Fatalf("held %d after a failed hand-over, want 3", r.Len())
	}
	fail = false
	if err := f.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := names(handed), []string{"c1", "c2", "c3"}; !cmp.Equal(got, want) {
		t.Fatalf("handed %v, want %v", got, want)
	}
	if bs := batchCounts(t, st); len(bs) != 0 {
		t.Fatalf("a follower wrote batches: %v", bs)
	}
	// Without a store (no manager yet) everything is held.
	f.Store = func() Leading { return nil }
	r.Record(ev(4))
	if err := f.Flush(context.Background()); err != nil || r.Len() != 1 {
		t.Fatalf("no store: %v, held %d", err, r.Len())
	}
}

// listCounter counts the listings of a store, and can play a follower.
type listCounter struct {
	*store.Store
	lists    int
	follower bool
}

func (c *listCounter) List(kind legion.Kind, ns string, keep func(legion.Object) bool) ([]legion.Object, uint64, error) {
	c.lists++
	return c.Store.List(kind, ns, keep)
}

func (c *listCounter) IsLeader() bool { return !c.follower }

func heldEvents(t *testing.T, st Store) int {
	t.Helper()
	n := 0
	for _, c := range batchCounts(t, st) {
		n += c
	}
	return n
}

// The leader applies the retention after every write from its own list of
// the batches, not by reading them all again (which decodes every event
// kept): it lists them when it takes the lead and once every pruneEvery,
// which also takes in batches it did not write itself.
func TestLeaderPrunesFromItsOwnListOfBatches(t *testing.T) {
	t.Parallel()
	cs := &listCounter{Store: dispatchertest.OpenStore(t)}
	r := NewRecorder(0, nil)
	now := t0
	f := &Flusher{Recorder: r, Store: func() Leading { return cs }, Now: func() time.Time { return now },
		Retention: Retention{MaxEvents: 5}, Hand: func(context.Context, []Event) error { return nil }}
	ctx := context.Background()
	round := func(events int) {
		t.Helper()
		for i := range events {
			r.Record(ev(i))
		}
		if err := f.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
	}
	for range 10 {
		round(2)
		if n := heldEvents(t, cs.Store); n > 5 {
			t.Fatalf("%d events kept, the limit is 5", n)
		}
	}
	if cs.lists != 1 {
		t.Fatalf("the batches were listed %d times in 10 rounds, want once", cs.lists)
	}
	// Another leader writes meanwhile; this one leads again and lists.
	cs.follower = true
	round(0)
	if _, err := Write(ctx, cs.Store, now, []Event{ev(1), ev(2), ev(3), ev(4)}); err != nil {
		t.Fatal(err)
	}
	cs.follower = false
	round(1)
	if n := heldEvents(t, cs.Store); cs.lists != 2 || n > 5 {
		t.Fatalf("after leading again: %d listings (want 2), %d events kept (limit 5)", cs.lists, n)
	}
	// Once a pruneEvery has passed it lists again, even with nothing new.
	now = now.Add(pruneEvery)
	round(0)
	if cs.lists != 3 {
		t.Fatalf("%d listings after %s, want 3", cs.lists, pruneEvery)
	}
}
