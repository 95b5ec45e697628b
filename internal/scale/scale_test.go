package scale

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/daemon"
)

// TestAssignmentsAreSentAsChanges runs 16 simulated agents at two
// sizes, 200 and then 1,000 tasks (services of 20 replicas), and then
// with one of the services grown to 200 replicas, and at each changes
// that service by one task: what that change costs the assignment
// streams must grow neither with the cluster nor with the service. Each
// message of the change (the new task to its node, the task's endpoint
// and the new policy member to every node) stays about the same size,
// while the whole set a stream starts with grows with the tasks (it
// carries every service's endpoints and every running task as a policy
// member), and no stream is sent a whole set.
func TestAssignmentsAreSentAsChanges(t *testing.T) {
	t.Parallel()
	const agents, replicas = 16, 20
	w0 := time.Now()
	h := New(t, Options{Agents: agents})
	t.Logf("3 managers and %d agents up in %s", agents, time.Since(w0).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	type reading struct {
		tasks             int
		largest, perAgent int64
		whole             int
	}
	// measure applies services of replicas tasks, service 0 with first
	// instead, and adds service 0 a task.
	measure := func(services, first int) reading {
		t.Helper()
		total := services*replicas + first - replicas
		w0 := time.Now()
		if err := h.Apply(ctx, services, replicas, "1"); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Client().ApplyOne(ctx, service(0, first, "1"), client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.WaitFor(ctx, "every task running", "1", nil, func(c Counts) bool { return c.Running == total }); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d tasks running on %d agents %s after the apply", total, agents, time.Since(w0).Round(time.Millisecond))
		// Let the last reports' changes reach every stream, then change one
		// service by one task. Other changes may still go on (a node late
		// with a heartbeat), so what is compared is each message, not the
		// window's sum.
		settle(t, h)
		before := h.Traffic()
		h.ResetLargest()
		if _, err := h.Client().ApplyOne(ctx, service(0, first+1, "1"), client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.WaitFor(ctx, "the new task running", "1", nil, func(c Counts) bool { return c.Running == total+1 }); err != nil {
			t.Fatal(err)
		}
		settle(t, h)
		d := h.Traffic().Sub(before)
		if d.Messages < agents || d.Deltas != d.Messages {
			t.Fatalf("at %d tasks the change reached the agents as %d messages of which %d deltas: want changes only, to each of %d agents",
				total, d.Messages, d.Deltas, agents)
		}
		whole, err := h.Agents[0].WholeSetSize(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Back to the size it had, for the next reading.
		if _, err := h.Client().ApplyOne(ctx, service(0, first, "1"), client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := h.WaitFor(ctx, "the extra task gone", "1", nil, func(c Counts) bool { return c.Running == total }); err != nil {
			t.Fatal(err)
		}
		r := reading{tasks: total, largest: h.Largest.Load(), perAgent: d.Bytes / agents, whole: whole}
		t.Logf("%d tasks, one task added to a service of %d: %d messages, %d bytes per agent, the largest %d bytes; a whole set %d bytes",
			total, first, d.Messages, r.perAgent, r.largest, r.whole)
		return r
	}
	small := measure(10, replicas)
	large := measure(50, replicas)
	big := measure(50, 10*replicas)
	if large.whole < 3*small.whole {
		t.Fatalf("a whole set grew from %d to %d bytes with the tasks from %d to %d: the comparison shows nothing",
			small.whole, large.whole, small.tasks, large.tasks)
	}
	// The changed service is the same size at both: its endpoints, its
	// new task and member. Slack for names a digit longer.
	const slack = 512
	if large.largest > small.largest+slack {
		t.Fatalf("the largest message of a one-task change grew from %d bytes at %d tasks to %d at %d: want it independent of the cluster's size",
			small.largest, small.tasks, large.largest, large.tasks)
	}
	// Nor with the service's size: a task's endpoint is sent, not the
	// service's.
	if big.largest > large.largest+slack {
		t.Fatalf("the largest message of a one-task change grew from %d bytes with a service of %d tasks to %d with one of %d: want it independent of the service's size",
			large.largest, replicas, big.largest, 10*replicas)
	}
	if big.perAgent > 2*large.perAgent+slack {
		t.Fatalf("a one-task change cost each agent %d bytes with a service of %d tasks and %d with one of %d: want it independent of the service's size",
			large.perAgent, replicas, big.perAgent, 10*replicas)
	}
	if large.largest >= int64(large.whole)/4 {
		t.Fatalf("a message of the change held %d bytes, a whole set %d: want a change far smaller than the set", large.largest, large.whole)
	}
}

// settle waits until the assignment streams carried nothing for a while.
func settle(t *testing.T, h *Harness) {
	t.Helper()
	const quiet = 500 * time.Millisecond
	deadline := time.Now().Add(20 * time.Second)
	last, since := h.Traffic(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("the assignment streams did not go quiet within 20s: %+v", h.Traffic())
		}
		time.Sleep(50 * time.Millisecond) // sampling the counters
		if now := h.Traffic(); now.Messages != last.Messages || now.Reports != last.Reports {
			last, since = now, time.Now()
		}
	}
}

// envInt reads a size from the environment.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// cpu is the process's user and system time so far.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// idleWindow is how long the idle phase measures. The leader's share is
// a few per cent of a core, a few dozen samples of the CPU profile in
// 10 s: 30 s of them make the figure steadier.
const idleWindow = 30 * time.Second

// maxElectionReport bounds the Raft lines a leader kill's report prints.
const maxElectionReport = 60

// maxWarningReport bounds the lines of the managers' warnings a phase's
// report prints (each line a manager's message and its count).
const maxWarningReport = 12

// profileName is the name of a phase's profile: its name up to the first
// figure or bracket, in words joined by dashes.
func profileName(phase string) string {
	var words []string
	for _, w := range strings.Fields(phase) {
		if w[0] == '(' || w[0] >= '0' && w[0] <= '9' {
			break
		}
		words = append(words, strings.TrimRight(w, ","))
	}
	return strings.Join(words, "-")
}

func TestProfileNames(t *testing.T) {
	for phase, want := range map[string]string{
		"idle (heartbeats only)":      "idle",
		"apply 20000 tasks":           "apply",
		"rolling update":              "rolling-update",
		"rolling update, leader kill": "rolling-update-leader-kill",
		"drain 32 nodes":              "drain",
	} {
		if got := profileName(phase); got != want {
			t.Errorf("profileName(%q) = %q, want %q", phase, got, want)
		}
	}
}

// TestScale is the full run of issue 21: 3 managers, 256 agents, 200
// services of 100 replicas; apply, a rolling update, the same again with
// a leader kill a quarter of the way, a drain of 32 nodes; each phase
// timed, with the traffic of the assignment streams and the process's
// CPU. Too big for CI: it runs
// with LEGION_SCALE=1 (sizes: LEGION_SCALE_AGENTS, _SERVICES, _REPLICAS,
// _DRAIN; LEGION_SCALE_TRACE=1 logs each poll, LEGION_SCALE_PROFILES=dir
// keeps each phase's CPU profile there (idle.pprof, apply.pprof,
// rolling-update.pprof, rolling-update-leader-kill.pprof, drain.pprof),
// LEGION_SCALE_PPROF=addr serves live profiles (the CPU profile only
// while no phase takes its own), LEGION_SCALE_FAST=1 keeps the tests' Raft timing
// instead of the production one).
func TestScale(t *testing.T) {
	if os.Getenv("LEGION_SCALE") == "" {
		t.Skip("the full scale run takes minutes: set LEGION_SCALE=1")
	}
	agents := envInt("LEGION_SCALE_AGENTS", 256)
	services := envInt("LEGION_SCALE_SERVICES", 200)
	replicas := envInt("LEGION_SCALE_REPLICAS", 100)
	drain := envInt("LEGION_SCALE_DRAIN", 32)
	total := services * replicas
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	// The managers and agents stand for daemons, so the process collects
	// as a daemon's does (GOGC, when set, is kept). Not restored: all that
	// runs after this in the package is its parallel tests (they start
	// once the sequential ones are done), whose checks do not depend on it.
	daemon.SetGC()
	if v, set := os.LookupEnv("GOGC"); set {
		t.Logf("the collector's target: GOGC=%q, as set", v)
	} else {
		t.Logf("the collector's target: %d, the daemon's", daemon.GCPercent)
	}

	if addr := os.Getenv("LEGION_SCALE_PPROF"); addr != "" {
		// Live profiles of the run (net/http/pprof's handlers).
		srv := &http.Server{Addr: addr}
		t.Cleanup(func() { srv.Close() })
		go srv.ListenAndServe()
	}
	o := Options{Agents: agents}
	if os.Getenv("LEGION_SCALE_FAST") == "" {
		tm := store.DefaultTiming()
		o.Timing = &tm
	}
	start := time.Now()
	h := New(t, o)
	if os.Getenv("LEGION_SCALE_TRACE") != "" {
		h.Trace = t.Logf
	}
	t.Logf("start: 3 managers, %d agents joined and registered in %s", agents, time.Since(start).Round(time.Millisecond))

	// phase runs and measures one phase, and returns the leader's share
	// of its CPU in cores (-1 when the split could not be taken).
	phase := func(name string, run func() (time.Duration, error)) float64 {
		t.Helper()
		leader := h.Cluster.WaitLeader().Addr
		split, serr := StartCPUSplit()
		defer pprof.StopCPUProfile() // when run fails; a no-op after Stop
		tr, c0, w0, i0 := h.Traffic(), cpu(), time.Now(), h.Cluster.WaitLeader().Store().AppliedIndex()
		p0, perr := h.Passes()
		took, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		wall := time.Since(w0)
		d := h.Traffic().Sub(tr)
		// The log's index is the cluster's, whichever manager leads now:
		// how many writes the phase took (each replica applies them all).
		entries := h.Cluster.WaitLeader().Store().AppliedIndex() - i0
		t.Logf("%-28s %8s  messages %7d (deltas %7d)  bytes %11d (%6.1f MB/s)  reports %6d  log entries %6d  process CPU %5.1f cores",
			name, took.Round(time.Millisecond), d.Messages, d.Deltas, d.Bytes, float64(d.Bytes)/wall.Seconds()/1e6, d.Reports,
			entries, (cpu()-c0).Seconds()/wall.Seconds())
		for _, name := range slices.Sorted(maps.Keys(d.Whole)) {
			t.Logf("    %s part carried whole in deltas %d times, %d bytes", name, d.Whole[name].Count, d.Whole[name].Bytes)
		}
		for _, e := range h.StreamEnds() {
			t.Logf("    streams ended: %s", e)
		}
		if p, err := h.Passes(); err == nil && perr == nil {
			t.Logf("    %s", p.Sub(p0))
		} else {
			t.Logf("    planning passes: not read: %v", errors.Join(perr, err))
		}
		warned := h.Warnings(w0, time.Now())
		for i, w := range warned {
			if i == maxWarningReport {
				t.Logf("    managers' warnings: %d lines more", len(warned)-i)
				break
			}
			t.Logf("    managers' warning: %s", w)
		}
		var shares CPUShares
		if serr == nil {
			shares, serr = split.Stop()
		}
		if serr != nil {
			t.Logf("    CPU by part: not taken: %v", serr)
			return -1
		}
		t.Logf("    CPU by part: %s", shares.Format(leader, wall))
		if dir := os.Getenv("LEGION_SCALE_PROFILES"); dir != "" {
			path := filepath.Join(dir, profileName(name)+".pprof")
			if err := split.Save(path); err != nil {
				t.Errorf("saving the profile of %s: %v", name, err)
			}
		}
		return shares.Managers[leader].Seconds() / wall.Seconds()
	}
	// Heartbeats alone: an idle cluster, the leader's share of the CPU
	// read from the profile's split.
	if l := phase("idle (heartbeats only)", func() (time.Duration, error) {
		time.Sleep(idleWindow) // a measuring window, not a wait for a condition
		return idleWindow, nil
	}); l >= 0 {
		t.Logf("    the leader's CPU with heartbeats alone: %.1f%% of a core (target: under 5%%)", 100*l)
	}
	phase(fmt.Sprintf("apply %d tasks", total), func() (time.Duration, error) {
		w0 := time.Now()
		if err := h.Apply(ctx, services, replicas, "1"); err != nil {
			return 0, err
		}
		at, err := h.WaitFor(ctx, "every task running", "1", nil, func(c Counts) bool { return c.Running == total })
		return at.Sub(w0), err
	})
	// The same rolling update twice: once undisturbed, then with the
	// leader killed a quarter of the way, so that what the kill costs is
	// the difference of two updates of one run.
	var calm time.Duration
	updated := func(c Counts) bool { return c.Running == total && c.AtTag == total }
	phase("rolling update", func() (time.Duration, error) {
		w0 := time.Now()
		if err := h.Apply(ctx, services, replicas, "2"); err != nil {
			return 0, err
		}
		at, err := h.WaitFor(ctx, "every task updated", "2", nil, updated)
		calm = at.Sub(w0)
		return calm, err
	})
	phase("rolling update, leader kill", func() (time.Duration, error) {
		w0 := time.Now()
		if err := h.Apply(ctx, services, replicas, "3"); err != nil {
			return 0, err
		}
		if _, err := h.WaitFor(ctx, "a quarter updated", "3", nil, func(c Counts) bool { return c.AtTag >= total/4 }); err != nil {
			return 0, err
		}
		leader := h.Cluster.WaitLeader()
		k0 := time.Now()
		leader.Kill()
		t.Logf("leader %s killed %s into the update", leader.Addr, k0.Sub(w0).Round(time.Millisecond))
		// The update goes on once another manager leads: the election's
		// part of what the kill costs is set by Raft's timing (5 to 10 s
		// of silence at production timing), the rest is the update's.
		next := h.Cluster.WaitLeader()
		elected := time.Since(k0)
		t.Logf("%s elected leader %s after the kill", next.Addr, elected.Round(time.Millisecond))
		// How: a split or turned-away vote shows here.
		lines := h.Elections(k0)
		for i, l := range lines {
			if i == maxElectionReport {
				t.Logf("    raft: %d lines more", len(lines)-i)
				break
			}
			t.Logf("    raft: %s", l)
		}
		at, err := h.WaitFor(ctx, "every task updated", "3", nil, updated)
		took := at.Sub(w0)
		t.Logf("converged %s after the leader kill (%s after the election); the update took %s, the one without a kill %s (%+.1fs)",
			at.Sub(k0).Round(time.Millisecond), (at.Sub(k0) - elected).Round(time.Millisecond),
			took.Round(time.Millisecond), calm.Round(time.Millisecond), (took - calm).Seconds())
		return took, err
	})
	phase(fmt.Sprintf("drain %d nodes", drain), func() (time.Duration, error) {
		w0 := time.Now()
		var names []string
		drained := map[string]bool{}
		for _, a := range h.Agents[:drain] {
			names = append(names, a.Name)
			drained[a.Name] = true
		}
		if err := h.Drain(ctx, names); err != nil {
			return 0, err
		}
		at, err := h.WaitFor(ctx, "the drained nodes empty", "", drained, func(c Counts) bool { return c.OnNodes == 0 && c.Running == total })
		return at.Sub(w0), err
	})
	// What the managers and agents hold, not what the last phase left for
	// the collector: the heap after a collection.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("process heap in use at the end, after a collection: %d MB (%d MB per agent if the agents held it all)",
		ms.HeapInuse>>20, ms.HeapInuse>>20/uint64(agents))
}
