package jail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
)

// fakeProc is a process that ends when killed (or on its stop signal when
// obeys is set), printing a line first.
type fakeProc struct {
	mu      sync.Mutex
	signals []syscall.Signal
	obeys   bool
	end     chan [2]any // code, signal name
	once    sync.Once
	stdout  io.Writer
}

func (p *fakeProc) Pid() int { return 777 }
func (p *fakeProc) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	p.signals = append(p.signals, sig)
	p.mu.Unlock()
	if p.obeys || sig == syscall.SIGKILL {
		p.finish(128+int(sig), SignalName(sig))
	}
	return nil
}
func (p *fakeProc) finish(code int, sig string) {
	p.once.Do(func() { p.end <- [2]any{code, sig} })
}
func (p *fakeProc) Wait() (int, string, error) {
	e := <-p.end
	return e[0].(int), e[1].(string), nil
}

type fakeStarter struct {
	proc *fakeProc
	err  error
	got  ProcSpec
}

func (s *fakeStarter) Start(p ProcSpec) (Process, error) {
	s.got = p
	if s.err != nil {
		return nil, s.err
	}
	s.proc.stdout = p.Stdout
	fmt.Fprintln(p.Stdout, "started")
	return s.proc, nil
}

func supervisorDir(t *testing.T, spec ContainerSpec) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), spec.ID)
	recs := Records{Dir: filepath.Dir(dir)}
	if err := recs.Create(Record{Spec: spec, Jail: jailName(spec)}); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(filepath.Join(dir, RunFile), RunInfo{Boot: 1, StartedAt: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestSupervisorStopWaitsGraceThenRemovesJail(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	spec := ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/web", "-v"}, Root: Root{Path: root},
		ImageEnv: []string{"PATH=/bin", "LANG=C"}, Env: []string{"LANG=en_US.UTF-8"}, WorkDir: "/srv",
		StopSignal: syscall.SIGQUIT, StopGrace: 30 * time.Second}
	dir := supervisorDir(t, spec)
	if err := WriteJSON(filepath.Join(dir, StopFile), StopRequest{Grace: 7 * time.Second}); err != nil {
		t.Fatal(err)
	}
	proc := &fakeProc{end: make(chan [2]any, 1)}
	starter := &fakeStarter{proc: proc}
	fake := sys.NewFake()
	clock := &fakeClock{now: time.Unix(100, 0)}
	var killed []int
	sup := &Supervisor{Dir: dir, Starter: starter, Runner: fake, Clock: clock,
		Kill: func(p Process) {
			killed = append(killed, p.Pid())
			p.Signal(syscall.SIGKILL) // what removing the jail does to the process
		}}
	stop := make(chan struct{})
	startedErr := make(chan error, 1)
	done := make(chan ExitInfo, 1)
	go func() {
		ei, _ := sup.Run(context.Background(), stop, func(err error) { startedErr <- err })
		done <- ei
	}()
	if err := <-startedErr; err != nil {
		t.Fatalf("start: %v", err)
	}
	close(stop)
	ei := <-done
	if ei.Code != 137 || ei.Signal != "KILL" {
		t.Fatalf("exit %+v, want killed after the grace", ei)
	}
	if d := cmp.Diff([]syscall.Signal{syscall.SIGQUIT, syscall.SIGKILL, syscall.SIGKILL}, proc.signals); d != "" {
		t.Fatalf("signals (-want +got):\n%s", d)
	}
	if clock.waited != 7*time.Second {
		t.Fatalf("waited %v, want the stop request's grace of 7s", clock.waited)
	}
	if d := cmp.Diff([]string{"jail -R pod1.web", "jail -R pod1.web"}, fake.Lines()); d != "" {
		t.Fatalf("jail removal (-want +got):\n%s", d)
	}
	var onDisk ExitInfo
	if err := ReadJSON(filepath.Join(dir, ExitFile), &onDisk); err != nil || onDisk.Code != 137 {
		t.Fatalf("exit file %+v %v", onDisk, err)
	}
	var run RunInfo
	if err := ReadJSON(filepath.Join(dir, RunFile), &run); err != nil || run.Pid != 777 || run.ShimPid == 0 {
		t.Fatalf("run file %+v %v: want the pids", run, err)
	}
	// What the process was started with.
	got := starter.got
	got.Stdout, got.Stderr = nil, nil
	want := ProcSpec{Jail: "pod1.web", Root: root, Path: "/bin/web", Args: []string{"/bin/web", "-v"},
		Env: []string{"PATH=/bin", "LANG=en_US.UTF-8", "HOME=/"}, Dir: "/srv",
		Cred: Credential{Groups: []uint32{0}, Home: "/"}, Setsid: true}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("process (-want +got):\n%s", d)
	}
	recs, err := ReadLogs(filepath.Join(dir, LogFileName), time.Time{})
	if err != nil || len(recs) != 1 || recs[0].Text != "started" {
		t.Fatalf("log %+v %v", recs, err)
	}
}

func TestSupervisorExitWithoutStop(t *testing.T) {
	t.Parallel()
	spec := ContainerSpec{ID: "job", Command: []string{"/bin/job"}, Root: Root{Path: t.TempDir()}}
	dir := supervisorDir(t, spec)
	proc := &fakeProc{end: make(chan [2]any, 1)}
	proc.finish(3, "")
	fake := sys.NewFake().On("jail -R job", sys.Answer{Code: 1, Stderr: `jail: "job" not found`})
	sup := &Supervisor{Dir: dir, Starter: &fakeStarter{proc: proc}, Runner: fake, Clock: &fakeClock{}}
	ei, err := sup.Run(context.Background(), nil, func(error) {})
	if err != nil || ei.Code != 3 || ei.Signal != "" {
		t.Fatalf("exit %+v %v", ei, err)
	}
	if d := cmp.Diff([]string{"jail -R job"}, fake.Lines()); d != "" {
		t.Fatalf("the jail goes when the main process ends (-want +got):\n%s", d)
	}
}

func TestSupervisorStartFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		spec      ContainerSpec
		starter   *fakeStarter
		wantCode  int
		permanent bool
	}{
		{"no such command on PATH", ContainerSpec{ID: "a", Command: []string{"nothere"}}, &fakeStarter{}, ShimExitPermanent, true},
		{"no such user", ContainerSpec{ID: "b", Command: []string{"/bin/x"}, User: "ghost"}, &fakeStarter{}, ShimExitPermanent, true},
		{"exec format error", ContainerSpec{ID: "c", Command: []string{"/bin/x"}}, &fakeStarter{err: classifyStart(syscall.ENOEXEC)}, ShimExitPermanent, true},
		{"out of processes", ContainerSpec{ID: "d", Command: []string{"/bin/x"}}, &fakeStarter{err: classifyStart(syscall.EAGAIN)}, ShimExitFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Root = Root{Path: t.TempDir()}
			dir := supervisorDir(t, tc.spec)
			var reported error
			sup := &Supervisor{Dir: dir, Starter: tc.starter, Clock: &fakeClock{}}
			ei, err := sup.Run(context.Background(), nil, func(err error) { reported = err })
			if err == nil || reported == nil {
				t.Fatalf("want a failed start, got %v / %v", err, reported)
			}
			var se *StartError
			if !errors.As(reported, &se) || se.Permanent != tc.permanent {
				t.Fatalf("reported %v: want permanent=%v", reported, tc.permanent)
			}
			if ei.Code != tc.wantCode || ei.Message == "" {
				t.Fatalf("exit %+v, want code %d with the reason", ei, tc.wantCode)
			}
		})
	}
}

func TestMergeEnvAndSignals(t *testing.T) {
	t.Parallel()
	got := MergeEnv([]string{"PATH=/bin", "A=1"}, []string{"A=2", "B=3"}, []string{"B=4"})
	if d := cmp.Diff([]string{"PATH=/bin", "A=2", "B=4"}, got); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	for in, want := range map[string]syscall.Signal{"TERM": syscall.SIGTERM, "SIGQUIT": syscall.SIGQUIT, "9": syscall.SIGKILL, "int": syscall.SIGINT} {
		if got, err := ParseSignal(in); err != nil || got != want {
			t.Errorf("ParseSignal(%q) = %v %v, want %v", in, got, err, want)
		}
	}
	if _, err := ParseSignal("NOPE"); err == nil {
		t.Error("an unknown signal must fail")
	}
	if SignalName(syscall.SIGTERM) != "TERM" {
		t.Errorf("SignalName(TERM) = %q", SignalName(syscall.SIGTERM))
	}
}

func TestShimMainRefusesBadArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{nil, {"start"}, {"frobnicate", "/tmp/x"}} {
		if code := ShimMain(args); code != 2 {
			t.Errorf("ShimMain(%q) = %d, want 2", args, code)
		}
	}
	// exec of a directory without a record fails as the supervisor's own failure.
	if code := ShimMain([]string{"exec", t.TempDir(), "--", "/bin/true"}); code != ShimExitFailed {
		t.Errorf("exec without a record = %d, want %d", code, ShimExitFailed)
	}
}

func TestProcessForReadsTheEnvFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "bin"), 0o755)
	os.WriteFile(filepath.Join(root, "bin", "app"), []byte("#!/bin/sh\n"), 0o755)
	envFile := filepath.Join(t.TempDir(), "env.json")
	os.WriteFile(envFile, []byte(`["TOKEN=s3cret", "MODE=file"]`), 0o600)
	spec := ContainerSpec{ID: "c", Root: Root{Path: root}, ImageEnv: []string{"MODE=image"}, Env: []string{"MODE=spec", "A=1"}, EnvFile: envFile, User: "0"}
	ps, err := ProcessFor(spec, []string{"/bin/app"}, nil, "", "")
	if err != nil {
		t.Fatal(err)
	}
	env := strings.Join(ps.Env, " ")
	for _, want := range []string{"TOKEN=s3cret", "MODE=file", "A=1"} {
		if !strings.Contains(env, want) {
			t.Errorf("env %q lacks %s", env, want)
		}
	}
	os.WriteFile(envFile, []byte(`["broken"]`), 0o600)
	if _, err := ProcessFor(spec, []string{"/bin/app"}, nil, "", ""); err == nil {
		t.Error("a bad environment file was accepted")
	}
}
