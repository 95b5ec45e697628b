// Package jailtest holds the conformance suite every jail.Runtime must pass
// and Memory, an in-memory runtime for tests of the runtime's users.
//
// The suite's containers run /bin/sh -c scripts using only echo, exit,
// sleep, trap and wait, so a runtime of jails or of plain processes runs
// them for real from a root holding /bin/sh (WithRoot), and Memory
// interprets them. It imports only the standard library, the runtimes
// (jail, jail/process) and the tests' polling helper.
package jailtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
)

// Option adjusts the suite to a runtime.
type Option func(*suite)

// WithRoot gives each container the root the runtime needs (one holding
// /bin/sh for real runtimes). Without it containers get an empty Root.
func WithRoot(root func(t *testing.T, id string) jail.Root) Option {
	return func(s *suite) { s.root = root }
}

// WithTimeout bounds every wait of the suite (30 s by default).
func WithTimeout(d time.Duration) Option { return func(s *suite) { s.timeout = d } }

type suite struct {
	newRuntime func(t *testing.T) jail.Runtime
	root       func(t *testing.T, id string) jail.Root
	timeout    time.Duration
}

// RunConformance runs the runtime contract's tests, each against a fresh
// runtime from newRuntime. Containers a test leaves are removed after it.
func RunConformance(t *testing.T, newRuntime func(t *testing.T) jail.Runtime, opts ...Option) {
	s := &suite{newRuntime: newRuntime, timeout: 30 * time.Second}
	for _, o := range opts {
		o(s)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, r jail.Runtime)
	}{
		{"CreateInspect", s.testCreateInspect},
		{"CreateRefusesBadSpecs", s.testCreateRefusesBadSpecs},
		{"RunToExitWithLogs", s.testRunToExit},
		{"EnvironmentOverImage", s.testEnvironment},
		{"ListBySelector", s.testList},
		{"Events", s.testEvents},
		{"StopHonoursSignal", s.testStopHonoured},
		{"StopDefaultSignalEnds", s.testStopDefault},
		{"StopKillsAfterGrace", s.testStopGrace},
		{"StopNotRunning", s.testStopNotRunning},
		{"Restart", s.testRestart},
		{"StartFailureIsPermanent", s.testStartFailure},
		{"Exec", s.testExec},
		{"Pod", s.testPod},
		{"RemoveRunning", s.testRemoveRunning},
		{"LogsFollow", s.testLogsFollow},
		{"LogsFollowEndsWithTheContainer", s.testLogsFollowEndsWithTheContainer},
		{"Usage", s.testUsage},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := s.newRuntime(t)
			t.Cleanup(func() { s.cleanup(t, r) })
			tc.fn(t, r)
		})
	}
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	t.Cleanup(cancel)
	return ctx
}

func (s *suite) cleanup(t *testing.T, r jail.Runtime) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	all, err := r.List(ctx, nil)
	if err != nil {
		t.Errorf("cleanup: list: %v", err)
		return
	}
	// Members first, then pods.
	slices.SortStableFunc(all, func(a, b jail.ContainerStatus) int {
		if a.Infra == b.Infra {
			return 0
		}
		if a.Infra {
			return 1
		}
		return -1
	})
	for _, c := range all {
		if err := r.Remove(ctx, c.ID); err != nil {
			t.Errorf("cleanup: remove %s: %v", c.ID, err)
		}
	}
}

func (s *suite) spec(t *testing.T, id, script string) jail.ContainerSpec {
	sp := jail.ContainerSpec{
		ID:       id,
		Labels:   map[string]string{"suite": "conformance"},
		Command:  []string{"/bin/sh", "-c", script},
		ImageEnv: []string{"PATH=/bin:/usr/bin:/sbin:/usr/sbin"},
	}
	if s.root != nil {
		sp.Root = s.root(t, id)
	}
	return sp
}

func (s *suite) create(t *testing.T, r jail.Runtime, sp jail.ContainerSpec) {
	t.Helper()
	if err := r.Create(s.ctx(t), sp); err != nil {
		t.Fatalf("create %s: %v", sp.ID, err)
	}
}

func (s *suite) start(t *testing.T, r jail.Runtime, id string) {
	t.Helper()
	if err := r.Start(s.ctx(t), id); err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
}

// waitState polls Inspect until the container reaches state.
func (s *suite) waitState(t *testing.T, r jail.Runtime, id string, state jail.State) jail.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(s.timeout)
	var last jail.ContainerStatus
	for time.Now().Before(deadline) {
		st, err := r.Inspect(s.ctx(t), id)
		if err != nil {
			t.Fatalf("inspect %s: %v", id, err)
		}
		if st.State == state {
			return st
		}
		last = st
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("container %s: state %s after %v, want %s", id, last.State, s.timeout, state)
	return last
}

func (s *suite) logs(t *testing.T, r jail.Runtime, id string) []jail.LogRecord {
	t.Helper()
	rc, err := r.Logs(s.ctx(t), id, jail.LogOptions{})
	if err != nil {
		t.Fatalf("logs %s: %v", id, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("logs %s: read: %v", id, err)
	}
	var out []jail.LogRecord
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" {
			continue
		}
		rec, err := jail.ParseRecord(line)
		if err != nil {
			t.Fatalf("logs %s: %v", id, err)
		}
		out = append(out, rec)
	}
	return out
}

// texts renders records as "stream:text" for comparison.
func texts(recs []jail.LogRecord) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Stream+":"+r.Text)
	}
	return out
}

func (s *suite) testCreateInspect(t *testing.T, r jail.Runtime) {
	sp := s.spec(t, "c1", "exit 0")
	sp.Labels["app"] = "web"
	sp.Annotations = map[string]string{"note": "kept"}
	s.create(t, r, sp)
	st, err := r.Inspect(s.ctx(t), "c1")
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if st.ID != "c1" || st.State != jail.StateCreated || st.Labels["app"] != "web" || st.Annotations["note"] != "kept" {
		t.Fatalf("inspect after create: %+v", st)
	}
	if st.CreatedAt.IsZero() {
		t.Fatalf("inspect: no creation time")
	}
	if err := r.Create(s.ctx(t), sp); !errors.Is(err, jail.ErrExists) {
		t.Fatalf("second create: want ErrExists, got %v", err)
	}
	if _, err := r.Inspect(s.ctx(t), "nope"); !errors.Is(err, jail.ErrNotFound) {
		t.Fatalf("inspect unknown: want ErrNotFound, got %v", err)
	}
	if err := r.Start(s.ctx(t), "nope"); !errors.Is(err, jail.ErrNotFound) {
		t.Fatalf("start unknown: want ErrNotFound, got %v", err)
	}
}

func (s *suite) testCreateRefusesBadSpecs(t *testing.T, r jail.Runtime) {
	for _, sp := range []jail.ContainerSpec{
		{ID: "", Command: []string{"/bin/sh"}},
		{ID: "bad/id", Command: []string{"/bin/sh"}},
		{ID: "nocmd"},
	} {
		if err := r.Create(s.ctx(t), sp); err == nil {
			t.Errorf("create %+v: want an error", sp)
		}
	}
	sp := s.spec(t, "orphan", "exit 0")
	sp.Pod = "nopod"
	if err := r.Create(s.ctx(t), sp); !errors.Is(err, jail.ErrNotFound) {
		t.Fatalf("create in an unknown pod: want ErrNotFound, got %v", err)
	}
}

func (s *suite) testRunToExit(t *testing.T, r jail.Runtime) {
	s.create(t, r, s.spec(t, "c1", "echo out; echo err >&2; exit 3"))
	s.start(t, r, "c1")
	st := s.waitState(t, r, "c1", jail.StateExited)
	if st.ExitCode != 3 || st.Signal != "" {
		t.Fatalf("exit: code %d signal %q, want 3 and none", st.ExitCode, st.Signal)
	}
	if st.StartedAt.IsZero() || st.FinishedAt.Before(st.StartedAt) {
		t.Fatalf("times: started %v finished %v", st.StartedAt, st.FinishedAt)
	}
	recs := s.logs(t, r, "c1")
	got := texts(recs)
	if !slices.Contains(got, "stdout:out") || !slices.Contains(got, "stderr:err") || len(got) != 2 {
		t.Fatalf("logs: %q, want stdout:out and stderr:err", got)
	}
	for _, rec := range recs {
		if rec.Partial || rec.Time.IsZero() {
			t.Fatalf("record %+v: want a full record with a time", rec)
		}
	}
}

func (s *suite) testEnvironment(t *testing.T, r jail.Runtime) {
	sp := s.spec(t, "c1", "echo $A-$B-$C")
	sp.ImageEnv = append(sp.ImageEnv, "A=image", "B=image")
	sp.Env = []string{"B=spec", "C=spec"}
	s.create(t, r, sp)
	s.start(t, r, "c1")
	s.waitState(t, r, "c1", jail.StateExited)
	if got := texts(s.logs(t, r, "c1")); !slices.Equal(got, []string{"stdout:image-spec-spec"}) {
		t.Fatalf("logs %q: want the spec's environment over the image's", got)
	}
}

func (s *suite) testList(t *testing.T, r jail.Runtime) {
	for i, app := range []string{"a", "a", "b"} {
		sp := s.spec(t, fmt.Sprintf("c%d", i), "exit 0")
		sp.Labels["app"] = app
		s.create(t, r, sp)
	}
	ids := func(sel map[string]string) []string {
		l, err := r.List(s.ctx(t), sel)
		if err != nil {
			t.Fatalf("list %v: %v", sel, err)
		}
		var out []string
		for _, c := range l {
			out = append(out, c.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		sel  map[string]string
		want []string
	}{
		{nil, []string{"c0", "c1", "c2"}},
		{map[string]string{"app": "a"}, []string{"c0", "c1"}},
		{map[string]string{"app": "b", "suite": "conformance"}, []string{"c2"}},
		{map[string]string{"app": "c"}, nil},
		{map[string]string{"app": ""}, nil},
	} {
		if got := ids(tc.sel); !slices.Equal(got, tc.want) {
			t.Errorf("list %v: %v, want %v", tc.sel, got, tc.want)
		}
	}
}

func (s *suite) testEvents(t *testing.T, r jail.Runtime) {
	ctx, cancel := context.WithCancel(s.ctx(t))
	ch, err := r.Events(ctx)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	s.create(t, r, s.spec(t, "c1", "exit 4"))
	s.start(t, r, "c1")
	s.waitState(t, r, "c1", jail.StateExited)
	if err := r.Remove(s.ctx(t), "c1"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	var got []string
	timeout := time.After(s.timeout)
	for !slices.Contains(got, jail.EventRemoved) {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("events closed early after %v", got)
			}
			if ev.ID != "c1" {
				continue
			}
			if ev.Type == jail.EventDied && ev.ExitCode != 4 {
				t.Errorf("died event: exit code %d, want 4", ev.ExitCode)
			}
			if ev.Labels["suite"] != "conformance" {
				t.Errorf("event %s: labels %v, want the container's", ev.Type, ev.Labels)
			}
			got = append(got, ev.Type)
		case <-timeout:
			t.Fatalf("events so far %v: no removed event", got)
		}
	}
	want := []string{jail.EventCreated, jail.EventStarted, jail.EventDied, jail.EventRemoved}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	cancel()
	for range ch { // the channel must close once ctx ends
	}
}

func (s *suite) runLong(t *testing.T, r jail.Runtime, id, script string, grace time.Duration) {
	sp := s.spec(t, id, script)
	sp.StopGrace = grace
	s.create(t, r, sp)
	s.start(t, r, id)
	s.waitState(t, r, id, jail.StateRunning)
	// The script must have set its traps before the signal comes.
	deadline := time.Now().Add(s.timeout)
	for !slices.Contains(texts(s.logs(t, r, id)), "stdout:ready") {
		if time.Now().After(deadline) {
			t.Fatalf("%s never said ready", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *suite) testStopHonoured(t *testing.T, r jail.Runtime) {
	// A grace far longer than the test: exit code 0 shows the trap ran.
	s.runLong(t, r, "c1", "trap 'exit 0' TERM; echo ready; sleep 600 & wait", 10*time.Minute)
	if err := r.Stop(s.ctx(t), "c1", -1); err != nil {
		t.Fatalf("stop: %v", err)
	}
	st := s.waitState(t, r, "c1", jail.StateExited)
	if st.ExitCode != 0 || st.Signal != "" {
		t.Fatalf("stopped: code %d signal %q, want 0 from the trap", st.ExitCode, st.Signal)
	}
}

func (s *suite) testStopDefault(t *testing.T, r jail.Runtime) {
	s.runLong(t, r, "c1", "echo ready; sleep 600 & wait", 10*time.Minute)
	if err := r.Stop(s.ctx(t), "c1", -1); err != nil {
		t.Fatalf("stop: %v", err)
	}
	st := s.waitState(t, r, "c1", jail.StateExited)
	if st.Signal != "TERM" || st.ExitCode != 128+int(syscall.SIGTERM) {
		t.Fatalf("stopped: code %d signal %q, want TERM (%d)", st.ExitCode, st.Signal, 128+int(syscall.SIGTERM))
	}
}

func (s *suite) testStopGrace(t *testing.T, r jail.Runtime) {
	const grace = 300 * time.Millisecond
	s.runLong(t, r, "c1", "trap '' TERM; echo ready; sleep 600 & wait", 10*time.Minute)
	begin := time.Now()
	if err := r.Stop(s.ctx(t), "c1", grace); err != nil {
		t.Fatalf("stop: %v", err)
	}
	st := s.waitState(t, r, "c1", jail.StateExited)
	if took := time.Since(begin); took < grace {
		t.Fatalf("stop took %v: the process ignoring the signal must get its grace of %v", took, grace)
	}
	if st.Signal != "KILL" || st.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("after grace: code %d signal %q, want KILL (137)", st.ExitCode, st.Signal)
	}
}

func (s *suite) testStopNotRunning(t *testing.T, r jail.Runtime) {
	s.create(t, r, s.spec(t, "c1", "exit 0"))
	if err := r.Stop(s.ctx(t), "c1", time.Second); err != nil {
		t.Fatalf("stop of a created container: %v", err)
	}
	if err := r.Stop(s.ctx(t), "nope", time.Second); !errors.Is(err, jail.ErrNotFound) {
		t.Fatalf("stop unknown: want ErrNotFound, got %v", err)
	}
}

func (s *suite) testRestart(t *testing.T, r jail.Runtime) {
	s.create(t, r, s.spec(t, "c1", "echo run; exit 1"))
	for i := 0; i < 2; i++ {
		s.start(t, r, "c1")
		st := s.waitState(t, r, "c1", jail.StateExited)
		if st.ExitCode != 1 {
			t.Fatalf("run %d: exit %d, want 1", i, st.ExitCode)
		}
	}
	if got := texts(s.logs(t, r, "c1")); !slices.Equal(got, []string{"stdout:run", "stdout:run"}) {
		t.Fatalf("logs %q: want both runs' output", got)
	}
}

func (s *suite) testStartFailure(t *testing.T, r jail.Runtime) {
	sp := s.spec(t, "c1", "")
	sp.Command = []string{"/nonexistent/legion-no-such-command"}
	s.create(t, r, sp)
	err := r.Start(s.ctx(t), "c1")
	if !errors.Is(err, jail.ErrPermanent) {
		t.Fatalf("start of a missing command: want ErrPermanent, got %v", err)
	}
	st, err := r.Inspect(s.ctx(t), "c1")
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if st.State == jail.StateRunning || st.Message == "" {
		t.Fatalf("after a failed start: %+v, want not running with a message", st)
	}
}

func (s *suite) testExec(t *testing.T, r jail.Runtime) {
	s.create(t, r, s.spec(t, "idle", "exit 0"))
	if _, err := r.Exec(s.ctx(t), "idle", jail.ExecSpec{Command: []string{"/bin/sh", "-c", "exit 0"}}); !errors.Is(err, jail.ErrNotRunning) {
		t.Fatalf("exec in a container not running: want ErrNotRunning, got %v", err)
	}
	sp := s.spec(t, "c1", "echo ready; sleep 600 & wait")
	sp.Env = []string{"WHO=container"}
	s.create(t, r, sp)
	s.start(t, r, "c1")
	s.waitState(t, r, "c1", jail.StateRunning)
	var stdout, stderr bytes.Buffer
	code, err := r.Exec(s.ctx(t), "c1", jail.ExecSpec{
		Command: []string{"/bin/sh", "-c", "echo $WHO $EXTRA; echo oops >&2; exit 5"},
		Env:     []string{"EXTRA=exec"},
		Stdout:  &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("exec: %v", err)
	}
	if code != 5 || stdout.String() != "container exec\n" || stderr.String() != "oops\n" {
		t.Fatalf("exec: code %d stdout %q stderr %q, want 5, %q, %q", code, stdout.String(), stderr.String(), "container exec\n", "oops\n")
	}
	if st, _ := r.Inspect(s.ctx(t), "c1"); st.State != jail.StateRunning {
		t.Fatalf("exec ended the container: %+v", st)
	}
}

func (s *suite) testPod(t *testing.T, r jail.Runtime) {
	infra := jail.ContainerSpec{ID: "pod1", Infra: true, Labels: map[string]string{"pod": "p"}}
	if s.root != nil {
		infra.Root = s.root(t, "pod1")
	}
	s.create(t, r, infra)
	st, err := r.Inspect(s.ctx(t), "pod1")
	if err != nil || !st.Infra || st.State != jail.StateRunning {
		t.Fatalf("infra after create: %+v %v, want running", st, err)
	}
	for _, id := range []string{"a", "b"} {
		sp := s.spec(t, id, "echo ready; sleep 600 & wait")
		sp.Pod = "pod1"
		sp.Labels["pod"] = "p"
		s.create(t, r, sp)
		s.start(t, r, id)
	}
	l, err := r.List(s.ctx(t), map[string]string{"pod": "p"})
	if err != nil || len(l) != 3 {
		t.Fatalf("list pod: %d containers %v, want 3", len(l), err)
	}
	for _, c := range l {
		if !c.Infra && c.Pod != "pod1" {
			t.Fatalf("member %s: pod %q, want pod1", c.ID, c.Pod)
		}
	}
	if err := r.Remove(s.ctx(t), "pod1"); err != nil {
		t.Fatalf("remove pod: %v", err)
	}
	if l, err := r.List(s.ctx(t), map[string]string{"pod": "p"}); err != nil || len(l) != 0 {
		t.Fatalf("after removing the pod: %v %v, want its members gone too", l, err)
	}
}

func (s *suite) testRemoveRunning(t *testing.T, r jail.Runtime) {
	s.create(t, r, s.spec(t, "c1", "trap '' TERM; echo ready; sleep 600 & wait"))
	s.start(t, r, "c1")
	s.waitState(t, r, "c1", jail.StateRunning)
	if err := r.Remove(s.ctx(t), "c1"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	if _, err := r.Inspect(s.ctx(t), "c1"); !errors.Is(err, jail.ErrNotFound) {
		t.Fatalf("inspect after remove: want ErrNotFound, got %v", err)
	}
	if err := r.Remove(s.ctx(t), "c1"); err != nil {
		t.Fatalf("second remove: %v", err)
	}
}

func (s *suite) testLogsFollow(t *testing.T, r jail.Runtime) {
	s.create(t, r, s.spec(t, "c1", "echo first; sleep 0.3; echo second; sleep 600 & wait"))
	s.start(t, r, "c1")
	ctx, cancel := context.WithCancel(s.ctx(t))
	defer cancel()
	rc, err := r.Logs(ctx, "c1", jail.LogOptions{Follow: true})
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	var got []string
	for len(got) < 2 && sc.Scan() {
		rec, err := jail.ParseRecord(sc.Text())
		if err != nil {
			t.Fatalf("follow: %v", err)
		}
		got = append(got, rec.Text)
	}
	if !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("followed %q (scan error %v), want first and second", got, sc.Err())
	}
	cancel()
	for sc.Scan() { // the reader must end once ctx ends
	}
}

// A follow ends once its container is removed, after all it wrote: a
// finished task's pod going is the end of its output.
func (s *suite) testLogsFollowEndsWithTheContainer(t *testing.T, r jail.Runtime) {
	s.create(t, r, s.spec(t, "c1", "echo last; sleep 600 & wait"))
	s.start(t, r, "c1")
	// Not s.ctx: its end would end the follow too, and hide a follow that
	// does not end by itself.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rc, err := r.Logs(ctx, "c1", jail.LogOptions{Follow: true})
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	defer rc.Close()
	sc := bufio.NewScanner(rc)
	if !sc.Scan() {
		t.Fatalf("follow ended before the first line: %v", sc.Err())
	}
	if rec, err := jail.ParseRecord(sc.Text()); err != nil || rec.Text != "last" {
		t.Fatalf("first record %q (%v), want last", sc.Text(), err)
	}
	if err := r.Remove(s.ctx(t), "c1"); err != nil {
		t.Fatalf("remove: %v", err)
	}
	ended := make(chan error, 1)
	go func() {
		for sc.Scan() {
		}
		ended <- sc.Err()
	}()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("the follow of a removed container ended with %v, want its end", err)
		}
	case <-time.After(followEndBound):
		t.Fatalf("the follow still open %s after its container was removed", followEndBound)
	}
}

// followEndBound is how long a follow may take to see its container gone
// (runtimes poll their logs).
const followEndBound = 30 * time.Second

func (s *suite) testUsage(t *testing.T, r jail.Runtime) {
	if _, err := r.Usage(s.ctx(t), "nope"); !errors.Is(err, jail.ErrNotFound) {
		t.Fatalf("usage of unknown: want ErrNotFound, got %v", err)
	}
	s.create(t, r, s.spec(t, "c1", "echo ready; sleep 600 & wait"))
	s.start(t, r, "c1")
	s.waitState(t, r, "c1", jail.StateRunning)
	u, err := r.Usage(s.ctx(t), "c1")
	if err != nil {
		t.Fatalf("usage: %v", err)
	}
	if u.Processes < 1 {
		t.Fatalf("usage of a running container: %+v, want at least one process", u)
	}
}
