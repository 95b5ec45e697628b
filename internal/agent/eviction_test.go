package agent

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/sys"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

// The decision alone: which task goes, in which order, and none above the
// threshold or within requests.
func TestEvictionVictim(t *testing.T) {
	t.Parallel()
	noReqSmall := evictionCandidate{Task: "ns/small", UID: "s", Usage: 10 * mi}
	noReqBig := evictionCandidate{Task: "ns/big", UID: "b", Usage: 1200 * mi}
	noReqBigToo := evictionCandidate{Task: "ns/alpha", UID: "a", Usage: 1200 * mi}
	within := evictionCandidate{Task: "ns/within", UID: "w", Request: 512 * mi, Usage: 500 * mi}
	atRequest := evictionCandidate{Task: "ns/at", UID: "t", Request: 512 * mi, Usage: 512 * mi}
	overLittle := evictionCandidate{Task: "ns/over-little", UID: "ol", Request: 1 * gi, Usage: 1*gi + 10*mi}
	overMuch := evictionCandidate{Task: "ns/over-much", UID: "om", Request: 64 * mi, Usage: 600 * mi}
	noReqUnread := evictionCandidate{Task: "ns/a-unread", UID: "u", Unread: true}
	reqUnread := evictionCandidate{Task: "ns/req-unread", UID: "ru", Request: 64 * mi, Unread: true}
	for _, c := range []struct {
		what             string
		avail, threshold int64
		tasks            []evictionCandidate
		want             string // the task evicted; empty: none
	}{
		{"above the threshold: none", 200 * mi, 100 * mi, []evictionCandidate{noReqBig, overMuch}, ""},
		{"at the threshold: none", 100 * mi, 100 * mi, []evictionCandidate{noReqBig}, ""},
		{"eviction off: none", 0, EvictionOff, []evictionCandidate{noReqBig}, ""},
		{"no tasks: none", 10 * mi, 100 * mi, nil, ""},
		{"no request first, the one using most", 80 * mi, 100 * mi,
			[]evictionCandidate{overMuch, noReqSmall, within, noReqBig}, "ns/big"},
		{"no request even when using less than one over its request", 80 * mi, 100 * mi,
			[]evictionCandidate{overMuch, noReqSmall}, "ns/small"},
		{"equal use: by name", 80 * mi, 100 * mi, []evictionCandidate{noReqBig, noReqBigToo}, "ns/alpha"},
		{"then over their request, furthest above first", 80 * mi, 100 * mi,
			[]evictionCandidate{overLittle, within, overMuch}, "ns/over-much"},
		{"within or at their requests: never", 1 * mi, 100 * mi, []evictionCandidate{within, atRequest}, ""},
		{"no request, unread: after those read", 80 * mi, 100 * mi, []evictionCandidate{noReqUnread, noReqSmall}, "ns/small"},
		{"no request, unread: before those over their request", 80 * mi, 100 * mi, []evictionCandidate{overMuch, noReqUnread}, "ns/a-unread"},
		{"a request, unread: never", 1 * mi, 100 * mi, []evictionCandidate{reqUnread, within}, ""},
	} {
		got, ok := evictionVictim(c.avail, c.threshold, c.tasks)
		if ok != (c.want != "") || ok && got.Task != c.want {
			t.Errorf("%s: evicted %q (%v), want %q", c.what, got.Task, ok, c.want)
		}
	}
}

func TestEvictionMessage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		c    evictionCandidate
		want string
	}{
		{evictionCandidate{Usage: 1288490189},
			"evicted: node memory available 80Mi is below 100Mi; the task requests no memory and used 1.2Gi"},
		{evictionCandidate{Request: 512 * mi, Usage: 1536 * mi},
			"evicted: node memory available 80Mi is below 100Mi; the task used 1.5Gi, 1Gi above its memory request of 512Mi"},
		{evictionCandidate{Unread: true},
			"evicted: node memory available 80Mi is below 100Mi; the task requests no memory (its memory use could not be read)"},
	} {
		if got := evictionMessage(80*mi, 100*mi, c.c); got != c.want {
			t.Errorf("message %q, want %q", got, c.want)
		}
	}
	for n, want := range map[int64]string{0: "0", 1000: "1000", 1536: "1.5Ki", 100 * mi: "100Mi", 3 * gi / 2: "1.5Gi"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// sysctl(8) as FreeBSD answers: -n prints each value on a line of its
// own; an OID the kernel lacks (no ZFS loaded) is warned of on standard
// error, and sysctl exits with the number of such OIDs.
func TestSysctlMemory(t *testing.T) {
	t.Parallel()
	const vm = "sysctl -n hw.pagesize vm.stats.vm.v_free_count vm.stats.vm.v_inactive_count"
	const arc = "sysctl -n kstat.zfs.misc.arcstats.size kstat.zfs.misc.arcstats.c_min"
	f := sys.NewFake().
		On(vm, sys.Answer{Stdout: "4096\n20480\n5120\n"}).     // 80Mi free, 20Mi inactive
		On(arc, sys.Answer{Stdout: "1073741824\n805306368\n"}) // 1Gi of ARC, 768Mi its minimum
	got, err := SysctlMemory{Runner: f}.AvailableMemory(context.Background())
	if want := 100*mi + 256*mi; err != nil || got != want {
		t.Errorf("available %d, %v; want %d (free and inactive pages, and the ARC above its minimum)", got, err, want)
	}
	if want := []string{vm, arc}; !slices.Equal(f.Lines(), want) {
		t.Errorf("ran %q, want %q", f.Lines(), want)
	}

	noZFS := sys.NewFake().On(vm, sys.Answer{Stdout: "4096\n20480\n5120\n"}).
		On(arc, sys.Answer{Stderr: sys.SysctlUnknown("kstat.zfs.misc.arcstats.size").Stderr +
			sys.SysctlUnknown("kstat.zfs.misc.arcstats.c_min").Stderr, Code: 2})
	if got, err := (SysctlMemory{Runner: noZFS}).AvailableMemory(context.Background()); err != nil || got != 100*mi {
		t.Errorf("without ZFS: available %d, %v; want %d", got, err, 100*mi)
	}

	// An ARC at its minimum gives nothing back.
	atMin := sys.NewFake().On(vm, sys.Answer{Stdout: "16384\n100\n0\n"}).On(arc, sys.Answer{Stdout: "100\n200\n"})
	if got, err := (SysctlMemory{Runner: atMin}).AvailableMemory(context.Background()); err != nil || got != 100*16384 {
		t.Errorf("ARC below its minimum: available %d, %v; want %d", got, err, 100*16384)
	}

	short := sys.NewFake().On(vm, sys.Answer{Stdout: "4096\n"})
	if _, err := (SysctlMemory{Runner: short}).AvailableMemory(context.Background()); err == nil || !strings.Contains(err.Error(), "expected 3 numbers") {
		t.Errorf("a short answer: %v, want it refused", err)
	}
	failing := sys.NewFake().On(vm, sys.SysctlUnknown("vm.stats.vm.v_free_count"))
	if _, err := (SysctlMemory{Runner: failing}).AvailableMemory(context.Background()); err == nil || !strings.Contains(err.Error(), "unknown oid") {
		t.Errorf("an unknown VM counter: %v, want sysctl's refusal", err)
	}
}

func TestMemInfo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "meminfo")
	if err := os.WriteFile(p, []byte("MemTotal:        8053372 kB\nMemFree:          286448 kB\nMemAvailable:     102400 kB\nBuffers:          123164 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := (MemInfo{Path: p}).AvailableMemory(context.Background()); err != nil || got != 100*mi {
		t.Errorf("available %d, %v; want %d", got, err, 100*mi)
	}
	old := filepath.Join(dir, "old")
	os.WriteFile(old, []byte("MemTotal:        8053372 kB\nMemFree:          286448 kB\n"), 0o644)
	if _, err := (MemInfo{Path: old}).AvailableMemory(context.Background()); err == nil || !strings.Contains(err.Error(), "no MemAvailable") {
		t.Errorf("a kernel without MemAvailable: %v, want it named", err)
	}
}

// fakeMemory is the node's available memory as the test sets it.
type fakeMemory struct {
	mu    sync.Mutex
	avail int64
	err   error
	reads int
}

func (m *fakeMemory) AvailableMemory(context.Context) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	return m.avail, m.err
}

func (m *fakeMemory) read() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.reads
}

func (m *fakeMemory) set(avail int64, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.avail, m.err = avail, err
}

// usageRuntime is the harness's runtime with each container's memory
// set by the test.
type usageRuntime struct {
	*recRuntime
	mu  sync.Mutex
	mem map[string]int64 // by container id
}

func (u *usageRuntime) Usage(ctx context.Context, id string) (jail.Usage, error) {
	use, err := u.recRuntime.Usage(ctx, id)
	if err != nil {
		return use, err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	use.MemoryBytes = u.mem[id]
	return use, nil
}

// evictionRig is a harness rig whose containers use what mem says and
// whose node has what the returned reader says available.
func evictionRig(t *testing.T, every time.Duration, mem map[string]int64) (*rig, *fakeMemory) {
	r := newRig(t)
	r.agent.Runtime = &usageRuntime{recRuntime: r.rt, mem: mem}
	fm := &fakeMemory{avail: 8 * gi}
	r.agent.Memory, r.agent.MemoryCheckEvery = fm, every
	return r, fm
}

// requesting is a test task whose container requests memory.
func requesting(uid string, memory int64) *legion.Task {
	t := testTask(uid)
	t.Spec.Pod.Containers[0].Resources.Requests.Memory = legion.Bytes(memory)
	return t
}

// Under memory pressure, a task that requests no memory is stopped as
// failed, its message saying why, and its pod removed; a task within its
// request keeps running however long the pressure lasts.
func TestAgentEvictsUnderMemoryPressure(t *testing.T) {
	t.Parallel()
	r, fm := evictionRig(t, 5*time.Millisecond, map[string]int64{"best-main": 1288490189, "held-main": 256 * mi})
	best, held := testTask("best"), requesting("held", 512*mi)
	r.start(t)
	r.assign(nil, best, held)
	r.mgr.await(t, best.Metadata.Name, "the task without requests running", isState(legion.TaskRunning, ""))
	r.mgr.await(t, held.Metadata.Name, "the task with requests running", isState(legion.TaskRunning, ""))

	fm.set(80*mi, nil)
	const msg = "evicted: node memory available 80Mi is below 100Mi; the task requests no memory and used 1.2Gi"
	st := r.mgr.await(t, best.Metadata.Name, "the eviction", isState(legion.TaskFailed, msg))
	if st.Permanent {
		t.Error("an evicted task is reported permanent: the planner would not replace it")
	}
	waitFor(t, "the evicted pod removed", func() bool { return r.podGone("best") }, func() string { return "" })

	n := fm.read()
	waitFor(t, "ten more measures", func() bool { return fm.read() >= n+10 }, func() string { return "" })
	for _, s := range r.mgr.of(held.Metadata.Name) {
		if s.State.Terminal() {
			t.Fatalf("the task within its request ended: %s %q", s.State, s.Message)
		}
	}
	if c, err := r.rt.Inspect(context.Background(), "held-main"); err != nil || c.State != jail.StateRunning {
		t.Errorf("the task within its request: %v %v, want its container running", c.State, err)
	}
	if got := r.agent.Evictions(); got[EvictedNoRequest] != 1 || got[EvictedOverRequest] != 0 {
		t.Errorf("evictions %v, want one of a task without requests", got)
	}
}

// The check driven tick by tick: one task at a time, the next only once
// the last evicted pod is gone (or the wait for it is over), tasks above
// their request only when none without one is left, nothing while the
// memory cannot be read or is above the threshold.
func TestAgentEvictsOneTaskAtATime(t *testing.T) {
	t.Parallel()
	r, fm := evictionRig(t, time.Hour, map[string]int64{ // the loop never ticks: the test does
		"big-main": 900 * mi, "small-main": 300 * mi, "over-main": 700 * mi, "held-main": 100 * mi})
	// The evicted pods stay until the test lets them go.
	release := map[string]chan struct{}{"big": make(chan struct{}), "small": make(chan struct{})}
	r.rt.beforeRemove = func(id string) {
		if ch := release[id]; ch != nil {
			<-ch
		}
	}
	big, small, over, held := testTask("big"), testTask("small"), requesting("over", 200*mi), requesting("held", 512*mi)
	var pmu sync.Mutex
	var pressure []bool // what the node is told to report
	r.agent.PressureChanged = func(on bool) { pmu.Lock(); pressure = append(pressure, on); pmu.Unlock() }
	said := func() []bool { pmu.Lock(); defer pmu.Unlock(); return slices.Clone(pressure) }
	r.start(t)
	r.assign(nil, big, small, over, held)
	for _, task := range []*legion.Task{big, small, over, held} {
		r.mgr.await(t, task.Metadata.Name, task.Metadata.Name+" running", isState(legion.TaskRunning, ""))
	}
	ctx := context.Background()
	check := func(want string) {
		t.Helper()
		if got := r.agent.checkMemory(ctx); got != want {
			t.Fatalf("checked: evicted %q, want %q", got, want)
		}
	}
	check("") // 8Gi available
	fm.set(0, errors.New("sysctl: unknown oid"))
	check("")
	if _, _, measured := r.agent.NodeMemory(); measured {
		t.Error("the memory reads as measured while its reader fails")
	}

	fm.set(50*mi, nil)
	check("default/web-big")
	check("") // big's pod is still there
	close(release["big"])
	r.mgr.await(t, big.Metadata.Name, "big's eviction", func(s legion.TaskStatus) bool {
		return s.State == legion.TaskFailed && strings.HasPrefix(s.Message, "evicted: node memory available 50Mi is below 100Mi")
	})
	waitFor(t, "big's worker done", func() bool { return workerDone(r.agent, "big") }, func() string { return "" })
	check("default/web-small")
	check("") // small's pod is still there
	// The wait for an evicted pod is bounded: past it, the next goes.
	r.clock.advance(evictionCleanupWait)
	check("default/web-over")
	r.mgr.await(t, over.Metadata.Name, "over's eviction", isState(legion.TaskFailed,
		"evicted: node memory available 50Mi is below 100Mi; the task used 700Mi, 500Mi above its memory request of 200Mi"))
	close(release["small"])
	waitFor(t, "the evicted workers done", func() bool { return workerDone(r.agent, "over") && workerDone(r.agent, "small") },
		func() string { return "" })
	check("") // held is within its request
	if got := r.agent.Evictions(); got[EvictedNoRequest] != 2 || got[EvictedOverRequest] != 1 {
		t.Errorf("evictions %v, want 2 without a request and 1 over it", got)
	}
	if avail, threshold, measured := r.agent.NodeMemory(); avail != 50*mi || threshold != 100*mi || !measured {
		t.Errorf("node memory %d of threshold %d (measured %v), want 50Mi of 100Mi", avail, threshold, measured)
	}
	// The node was told once when the pressure began; now once it is over.
	if got := said(); !slices.Equal(got, []bool{true}) {
		t.Errorf("pressure reported %v under pressure, want [true]", got)
	}
	fm.set(4*gi, nil)
	check("")
	check("")
	if got := said(); !slices.Equal(got, []bool{true, false}) {
		t.Errorf("pressure reported %v once over, want [true false]", got)
	}
}

// workerDone reports whether the task's worker has ended.
func workerDone(a *Agent, uid string) bool {
	a.mu.Lock()
	w := a.workers[uid]
	a.mu.Unlock()
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

func TestEvictionThreshold(t *testing.T) {
	t.Parallel()
	for set, want := range map[int64]int64{0: DefaultEvictionMemoryAvailable, -1: EvictionOff, -5: EvictionOff, 1 << 30: 1 << 30} {
		a := &Agent{EvictionMemoryAvailable: set, Logger: slog.New(slog.DiscardHandler)}
		if got := a.evictionThreshold(); got != want {
			t.Errorf("EvictionMemoryAvailable %d: threshold %d, want %d", set, got, want)
		}
	}
}
