package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/legionbsd/legion/sys"
	"golang.org/x/sys/unix"
)

// fakeClock advances by every wait, so grace periods pass at once; waited
// records the waits.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	waited time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waited += d
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

const (
	testBoot     = "{ sec = 1764000000, usec = 42 } Mon Nov 24 16:00:00 2025"
	testBootUnix = 1764000000
	shim         = "/usr/local/bin/legion"
)

// jlsAnswer renders jls --libxo=json output holding params, every value a
// string as jls gives them.
func jlsAnswer(name string, params []Param) sys.Answer {
	var b strings.Builder
	b.WriteString(`{"__version": "2", "jail-information": {"jail": [{"name": "` + name + `"`)
	for _, p := range params {
		v := p.Value
		if strings.HasPrefix(p.Name, "allow.") {
			v = map[string]string{"0": "false", "1": "true"}[v]
		}
		fmt.Fprintf(&b, `, "%s": "%s"`, p.Name, v)
	}
	b.WriteString("}]}}\n")
	return sys.Answer{Stdout: b.String()}
}

type env struct {
	t     *testing.T
	fake  *sys.Fake
	clock *fakeClock
	data  string
	j     *Jails

	mu sync.Mutex
	// supervisors are the start locks the supervisors launchThrough
	// stands for hold while they live: until endSupervisors, or the end
	// of the test.
	supervisors []*os.File
}

// launchThrough is a Config.Launch that starts no supervisor: the start
// is one of r's commands, `shim jail-shim supervise DIR`, and r's answer
// stands for the supervisor's report (exit code 0, or the code with the
// reason on standard error). A supervisor started holds the run's start
// lock while it lives.
func (e *env) launchThrough(r sys.Runner) func(shim, dir string, lock *os.File) (int, string) {
	return func(shim, dir string, lock *os.File) (int, string) {
		_, err := r.Run(context.Background(), sys.Command(shim, ShimCommand, "supervise", dir))
		var ee *sys.ExitError
		switch {
		case err == nil:
			// Closed on exec: a process another test starts meanwhile
			// would otherwise hold the lock as long as it lives.
			fd, err := unix.FcntlInt(lock.Fd(), unix.F_DUPFD_CLOEXEC, 0)
			if err != nil {
				e.t.Error(err)
				return ShimExitFailed, err.Error()
			}
			e.mu.Lock()
			e.supervisors = append(e.supervisors, os.NewFile(uintptr(fd), lock.Name()))
			e.mu.Unlock()
			return 0, ""
		case errors.As(err, &ee):
			return ee.Code, strings.TrimSpace(ee.Stderr)
		}
		return ShimExitFailed, err.Error()
	}
}

// endSupervisors has the supervisors started so far end (a reboot): they
// let go of their start locks.
func (e *env) endSupervisors() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, f := range e.supervisors {
		f.Close()
	}
	e.supervisors = nil
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, fake: sys.NewFake(), clock: &fakeClock{now: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}, data: t.TempDir()}
	t.Cleanup(e.endSupervisors)
	e.fake.On("sysctl -n kern.boottime", sys.Answer{Stdout: testBoot})
	e.j = e.runtime()
	return e
}

func (e *env) runtime() *Jails {
	j, err := NewJails(Config{DataDir: e.data, Runner: e.fake, Shim: shim, Launch: e.launchThrough(e.fake), Clock: e.clock, Alive: alwaysAlive})
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

func (e *env) wantLines(want []string) {
	e.t.Helper()
	if d := cmp.Diff(want, e.fake.Lines(), cmpopts.EquateEmpty()); d != "" {
		e.t.Fatalf("command lines (-want +got):\n%s", d)
	}
	e.fake.Reset()
}

var (
	defaultParams = []string{"allow.raw_sockets=0", "allow.chflags=0", "allow.mlock=0", "allow.mount=0",
		"sysvmsg=disable", "sysvsem=disable", "sysvshm=disable", "enforce_statfs=2"}
	readBackNames = "allow.raw_sockets allow.chflags allow.mlock allow.mount sysvmsg sysvsem sysvshm enforce_statfs"
)

func join(parts ...any) string {
	var out []string
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			out = append(out, p)
		case []string:
			out = append(out, p...)
		}
	}
	return strings.Join(out, " ")
}

func TestPodWithVolumeSecretAndLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	webRoot, sideRoot := t.TempDir(), t.TempDir()
	volume := t.TempDir()
	secret := filepath.Join(t.TempDir(), "db-password")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	e.fake.On("jls --libxo=json -j pod1.web ", jlsAnswer("pod1.web", ContainerParams(Security{}, true)))
	e.fake.On("jls --libxo=json -j pod1.side ", jlsAnswer("pod1.side", ContainerParams(Security{}, true)))

	if err := e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true, Labels: map[string]string{"legion.task": "t1"}}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	e.wantLines([]string{
		"sysctl -n kern.boottime",
		join("jail -c name=pod1 persist vnet=new path=/var/empty host.hostname=pod1 children.max=64", defaultParams),
		"jls --libxo=json -j pod1 vnet " + readBackNames,
	})

	web := ContainerSpec{
		ID: "web", Pod: "pod1", Labels: map[string]string{"legion.task": "t1"},
		Command: []string{"/usr/local/bin/web"},
		Root:    Root{Path: webRoot, Dataset: "tank/legion/containers/web"},
		Mounts: []Mount{
			{Kind: MountNullfs, Source: volume, Target: "/var/db/web"},
			{Kind: MountNullfs, Source: secret, Target: "/run/secrets/db-password", ReadOnly: true},
		},
		Resources: Resources{CPUMillis: 500, MemoryBytes: 256 << 20, MaxProc: 20, OpenFiles: 1024},
	}
	if err := e.j.Create(ctx, web); err != nil {
		t.Fatalf("create web: %v", err)
	}
	e.wantLines([]string{
		"mount -t devfs devfs " + webRoot + "/dev",
		"devfs -m " + webRoot + "/dev ruleset 4",
		"devfs -m " + webRoot + "/dev rule applyset",
		"mount_nullfs " + volume + " " + webRoot + "/var/db/web",
		"mount_nullfs -o ro " + secret + " " + webRoot + "/run/secrets/db-password",
	})
	if st, err := os.Stat(filepath.Join(webRoot, "run/secrets/db-password")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("secret target: %v; want a file made inside the root", err)
	}
	side := ContainerSpec{ID: "side", Pod: "pod1", Labels: map[string]string{"legion.task": "t1"},
		Command: []string{"/bin/sh", "-c", "exec sleep 1000"}, Root: Root{Path: sideRoot}}
	if err := e.j.Create(ctx, side); err != nil {
		t.Fatalf("create side: %v", err)
	}
	e.fake.Reset()

	for _, id := range []string{"web", "side"} {
		if err := e.j.Start(ctx, id); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
	}
	containerParams := []string{"allow.raw_sockets=0", "allow.chflags=0", "allow.mlock=0", "allow.mount=0",
		"sysvmsg=disable", "sysvsem=disable", "sysvshm=disable", "enforce_statfs=2", "securelevel=2"}
	e.wantLines([]string{
		join("jail -c name=pod1.web path="+webRoot+" host.hostname=web persist ip4=inherit ip6=inherit devfs_ruleset=4", containerParams),
		"jls --libxo=json -j pod1.web " + readBackNames + " securelevel",
		"rctl -a jail:pod1.web:pcpu:deny=50",
		"rctl -a jail:pod1.web:maxproc:deny=20",
		"rctl -a jail:pod1.web:openfiles:deny=1024",
		"rctl -a jail:pod1.web:memoryuse:sigkill=268435456/process",
		shim + " jail-shim supervise " + filepath.Join(e.data, "jails", "web"),
		join("jail -c name=pod1.side path="+sideRoot+" host.hostname=side persist ip4=inherit ip6=inherit devfs_ruleset=4", containerParams),
		"jls --libxo=json -j pod1.side " + readBackNames + " securelevel",
		shim + " jail-shim supervise " + filepath.Join(e.data, "jails", "side"),
	})
	for _, id := range []string{"web", "side"} {
		st, err := e.j.Inspect(ctx, id)
		if err != nil || st.State != StateRunning || st.Pod != "pod1" {
			t.Fatalf("inspect %s: %+v %v", id, st, err)
		}
		if _, err := os.Stat(filepath.Join(e.data, "jails", id, RecordFile)); err != nil {
			t.Fatalf("record of %s: %v", id, err)
		}
	}
	l, err := e.j.List(ctx, map[string]string{"legion.task": "t1"})
	if err != nil || len(l) != 3 {
		t.Fatalf("list: %d %v", len(l), err)
	}

	// Removing the pod removes its members, their mounts and limits. Both
	// supervisors report their exits as the jails go.
	for _, id := range []string{"web", "side"} {
		writeExit(t, e.data, id, ExitInfo{Code: 137, Signal: "KILL"})
	}
	e.fake.Reset()
	if err := e.j.Remove(ctx, "pod1"); err != nil {
		t.Fatalf("remove pod: %v", err)
	}
	e.wantLines([]string{
		"umount -f " + sideRoot + "/dev",
		"rctl -r jail:pod1.side",
		"umount -f " + webRoot + "/run/secrets/db-password",
		"umount -f " + webRoot + "/var/db/web",
		"umount -f " + webRoot + "/dev",
		"rctl -r jail:pod1.web",
		"jail -R pod1",
	})
	if l, _ := e.j.List(ctx, nil); len(l) != 0 {
		t.Fatalf("after removing the pod: %+v", l)
	}
}

func writeExit(t *testing.T, data, id string, ei ExitInfo) {
	t.Helper()
	if err := WriteJSON(filepath.Join(data, "jails", id, ExitFile), ei); err != nil {
		t.Fatal(err)
	}
}

func intp(i int) *int { return &i }

func alwaysAlive(int) bool { return true }

func TestLoosenedSecurityGivesTheInfraJailTheUnion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.fake.On("jls --libxo=json -j pod1 vnet", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	if err := e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true}); err != nil {
		t.Fatal(err)
	}
	union := InfraParams([]Security{{Allow: []string{AllowRawSockets, AllowSysvipc}}, {Allow: []string{AllowMlock}, EnforceStatfs: intp(1)}})
	e.fake.Once("jls --libxo=json -j pod1 allow", jlsAnswer("pod1", InfraParams([]Security{{Allow: []string{AllowRawSockets, AllowSysvipc}}})))
	e.fake.On("jls --libxo=json -j pod1 allow", jlsAnswer("pod1", union))
	ping := Security{Allow: []string{AllowRawSockets, AllowSysvipc}}
	db := Security{Allow: []string{AllowMlock}, EnforceStatfs: intp(1), Securelevel: intp(-1)}
	e.fake.Reset()
	root := t.TempDir()
	if err := e.j.Create(ctx, ContainerSpec{ID: "ping", Pod: "pod1", Command: []string{"/sbin/ping"}, Root: Root{Path: root}, Security: ping}); err != nil {
		t.Fatal(err)
	}
	if err := e.j.Create(ctx, ContainerSpec{ID: "db", Pod: "pod1", Command: []string{"/usr/local/bin/postgres"}, Root: Root{Path: t.TempDir()}, Security: db}); err != nil {
		t.Fatal(err)
	}
	var jailLines []string
	for _, l := range e.fake.Lines() {
		if strings.HasPrefix(l, "jail ") || strings.HasPrefix(l, "jls ") {
			jailLines = append(jailLines, l)
		}
	}
	want := []string{
		"jail -m name=pod1 allow.raw_sockets=1 sysvmsg=new sysvsem=new sysvshm=new",
		"jls --libxo=json -j pod1 " + readBackNames,
		"jail -m name=pod1 allow.mlock=1 enforce_statfs=1",
		"jls --libxo=json -j pod1 " + readBackNames,
	}
	if d := cmp.Diff(want, jailLines); d != "" {
		t.Fatalf("infra jail changes (-want +got):\n%s", d)
	}
	e.fake.On("jls --libxo=json -j pod1.ping", jlsAnswer("pod1.ping", ContainerParams(ping, true)))
	e.fake.Reset()
	if err := e.j.Start(ctx, "ping"); err != nil {
		t.Fatal(err)
	}
	// Each container keeps its own profile: ping gets raw sockets and the
	// pod's SysV namespace, not db's mlock.
	if got := e.fake.Lines()[0]; got != "jail -c name=pod1.ping path="+root+" host.hostname=ping persist ip4=inherit ip6=inherit devfs_ruleset=4 allow.raw_sockets=1 allow.chflags=0 allow.mlock=0 allow.mount=0 sysvmsg=inherit sysvsem=inherit sysvshm=inherit enforce_statfs=2 securelevel=2" {
		t.Fatalf("member jail: %s", got)
	}
	if d := cmp.Diff([]Param{{"allow.raw_sockets", "1"}, {"allow.chflags", "0"}, {"allow.mlock", "1"}, {"allow.mount", "0"},
		{"sysvmsg", "new"}, {"sysvsem", "new"}, {"sysvshm", "new"}, {"enforce_statfs", "1"}}, union); d != "" {
		t.Fatalf("union (-want +got):\n%s", d)
	}
	if got := ContainerParams(db, true); got[len(got)-1] != (Param{"securelevel", "-1"}) {
		t.Fatalf("db securelevel: %v", got)
	}
}

func TestReadBackMismatchRefusesThePod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// The kernel left raw sockets on (as ocijail did to every jail).
	looser := ContainerParams(Security{}, true)
	looser[0].Value = "1"
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	e.fake.On("jls --libxo=json -j pod1.web ", jlsAnswer("pod1.web", looser))
	if err := e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true}); err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := e.j.Create(ctx, ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/web"}, Root: Root{Path: root}}); err != nil {
		t.Fatal(err)
	}
	e.fake.Reset()
	err := e.j.Start(ctx, "web")
	if !errors.Is(err, ErrProfileMismatch) || !errors.Is(err, ErrPermanent) {
		t.Fatalf("start: %v, want a permanent profile mismatch", err)
	}
	if !strings.Contains(err.Error(), "allow.raw_sockets: want 0, got true") {
		t.Fatalf("error %q does not name the parameter", err)
	}
	lines := e.fake.Lines()
	if last := lines[len(lines)-1]; last != "jail -R pod1.web" {
		t.Fatalf("last command %q, want the jail removed; all: %q", last, lines)
	}
	for _, l := range lines {
		if strings.Contains(l, "jail-shim") || strings.HasPrefix(l, "rctl") {
			t.Fatalf("nothing may run in a refused jail: %q", lines)
		}
	}
	st, _ := e.j.Inspect(ctx, "web")
	if st.State != StateExited || !strings.Contains(st.Message, "allow.raw_sockets") {
		t.Fatalf("status after refusal: %+v", st)
	}

	// A pod jail that came up without its own VNET is refused too.
	e2 := newEnv(t)
	e2.fake.On("jls --libxo=json -j pod2 ", jlsAnswer("pod2", append([]Param{{"vnet", "inherit"}}, InfraParams(nil)...)))
	err = e2.j.Create(ctx, ContainerSpec{ID: "pod2", Infra: true})
	if !errors.Is(err, ErrProfileMismatch) || !strings.Contains(err.Error(), "vnet: want new, got inherit") {
		t.Fatalf("pod without VNET: %v", err)
	}
	if _, err := e2.j.Inspect(ctx, "pod2"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused pod must leave no record: %v", err)
	}
}

// startedMember makes pod1 and a running member web whose supervisor is
// pid 4242.
func startedMember(t *testing.T, e *env, spec ContainerSpec) {
	t.Helper()
	ctx := context.Background()
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	e.fake.On("jls --libxo=json -j pod1."+spec.ID+" ", jlsAnswer("pod1."+spec.ID, ContainerParams(spec.Security, true)))
	if err := e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true}); err != nil {
		t.Fatal(err)
	}
	if err := e.j.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := e.j.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	// What the supervisor adds once the process runs.
	path := filepath.Join(e.data, "jails", spec.ID, RunFile)
	var run RunInfo
	if err := ReadJSON(path, &run); err != nil {
		t.Fatal(err)
	}
	run.ShimPid, run.Pid = 4242, 4243
	if err := WriteJSON(path, run); err != nil {
		t.Fatal(err)
	}
	e.fake.Reset()
}

// exitOn is a Runner that, on a command starting with prefix, writes the
// exit record as the supervisor would, then runs the command on next.
type exitOn struct {
	next   sys.Runner
	prefix string
	path   string
	exit   ExitInfo
}

func (r *exitOn) Run(ctx context.Context, c sys.Cmd) (sys.Result, error) {
	if strings.HasPrefix(c.String(), r.prefix) {
		if err := WriteJSON(r.path, r.exit); err != nil {
			return sys.Result{}, err
		}
	}
	return r.next.Run(ctx, c)
}

func TestStopWithGracePeriod(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	spec := ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/web"}, StopGrace: 30 * time.Second}

	t.Run("supervisor ends it within the grace", func(t *testing.T) {
		e := newEnv(t)
		spec.Root = Root{Path: t.TempDir()}
		startedMember(t, e, spec)
		// The supervisor reports after the stop signal: no jail -R from the runtime.
		j, _ := NewJails(Config{DataDir: e.data, Shim: shim, Clock: e.clock, Alive: alwaysAlive, Runner: &exitOn{next: e.fake, prefix: "kill",
			path: filepath.Join(e.data, "jails", "web", ExitFile), exit: ExitInfo{Code: 0}}})
		if err := j.Stop(ctx, "web", -1); err != nil {
			t.Fatal(err)
		}
		e.wantLines([]string{"sysctl -n kern.boottime", "kill -s TERM 4242"})
		var req StopRequest
		if err := ReadJSON(filepath.Join(e.data, "jails", "web", StopFile), &req); err != nil || req.Grace != 30*time.Second {
			t.Fatalf("stop request %+v %v: want the spec's 30s grace for the supervisor", req, err)
		}
		if st, _ := j.Inspect(ctx, "web"); st.State != StateExited || st.ExitCode != 0 {
			t.Fatalf("after stop: %+v", st)
		}
	})

	t.Run("runtime removes the jail when the supervisor does not report", func(t *testing.T) {
		e := newEnv(t)
		spec.Root = Root{Path: t.TempDir()}
		startedMember(t, e, spec)
		before := e.clock.waited
		if err := e.j.Stop(ctx, "web", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		e.wantLines([]string{"kill -s TERM 4242", "jail -R pod1.web"})
		waited := e.clock.waited - before
		if want := 10*time.Second + 2*ShimMargin; waited != want {
			t.Fatalf("waited %v, want the grace of 10s plus the supervisor's margins (%v)", waited, want)
		}
		st, _ := e.j.Inspect(ctx, "web")
		if st.State != StateExited || st.Signal != "KILL" || st.ExitCode != 137 {
			t.Fatalf("after a forced stop: %+v", st)
		}
		// Stopping again does nothing.
		if err := e.j.Stop(ctx, "web", time.Second); err != nil {
			t.Fatal(err)
		}
		e.wantLines(nil)
	})
}

func TestAdoptionAfterRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	spec := ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/web"}, Root: Root{Path: t.TempDir()},
		Resources: Resources{MaxProc: 20}}
	startedMember(t, e, spec)
	if err := e.j.Create(ctx, ContainerSpec{ID: "done", Pod: "pod1", Command: []string{"/bin/true"}, Root: Root{Path: t.TempDir()}}); err != nil {
		t.Fatal(err)
	}

	// A new agent on the same data directory; the member's jail was left
	// with raw sockets by an older version.
	fake := sys.NewFake()
	fake.On("sysctl -n kern.boottime", sys.Answer{Stdout: testBoot})
	fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	looser := ContainerParams(Security{}, true)
	looser[0].Value = "1"
	fake.Once("jls --libxo=json -j pod1.web ", jlsAnswer("pod1.web", looser))
	fake.On("jls --libxo=json -j pod1.web ", jlsAnswer("pod1.web", ContainerParams(Security{}, true)))
	j, err := NewJails(Config{DataDir: e.data, Runner: fake, Shim: shim, Clock: e.clock, Alive: func(pid int) bool { return pid == 4242 }})
	if err != nil {
		t.Fatal(err)
	}
	l, err := j.List(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]State{}
	for _, st := range l {
		states[st.ID] = st.State
	}
	if d := cmp.Diff(map[string]State{"pod1": StateRunning, "web": StateRunning, "done": StateCreated}, states); d != "" {
		t.Fatalf("found after restart (-want +got):\n%s", d)
	}
	fake.Reset()
	if err := j.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"jls --libxo=json -j pod1 vnet " + readBackNames,
		"jls --libxo=json -j pod1.web " + readBackNames + " securelevel",
		"jail -m name=pod1.web allow.raw_sockets=0 allow.chflags=0 allow.mlock=0 allow.mount=0 sysvmsg=disable sysvsem=disable sysvshm=disable enforce_statfs=2 securelevel=2",
		"jls --libxo=json -j pod1.web " + readBackNames + " securelevel",
		"rctl -a jail:pod1.web:maxproc:deny=20",
	}
	if d := cmp.Diff(want, fake.Lines()); d != "" {
		t.Fatalf("adoption (-want +got):\n%s", d)
	}

	// After a reboot the run is over, and a supervisor that died without
	// an exit status ends the run too.
	rebooted := sys.NewFake().On("sysctl -n kern.boottime", sys.Answer{Stdout: "{ sec = 1764999999, usec = 0 }"})
	j2, _ := NewJails(Config{DataDir: e.data, Runner: rebooted, Shim: shim, Clock: e.clock})
	if st, _ := j2.Inspect(ctx, "web"); st.State != StateExited || st.Message != "ended by a reboot" {
		t.Fatalf("after a reboot: %+v", st)
	}
	j3, _ := NewJails(Config{DataDir: e.data, Runner: fake, Shim: shim, Clock: e.clock, Alive: func(int) bool { return false }})
	if st, _ := j3.Inspect(ctx, "web"); st.State != StateExited {
		t.Fatalf("with the supervisor gone: %+v", st)
	}
}

func TestStartAfterRebootMountsAgain(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	root := t.TempDir()
	startedMember(t, e, ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/web"}, Root: Root{Path: root}})
	rebooted := sys.NewFake().On("sysctl -n kern.boottime", sys.Answer{Stdout: "{ sec = 1764999999, usec = 0 }"}).
		On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", []Param{{"vnet", "new"}})).
		On("jls --libxo=json -j pod1.web ", jlsAnswer("pod1.web", ContainerParams(Security{}, true)))
	e.endSupervisors() // with the boot they ran in
	j, _ := NewJails(Config{DataDir: e.data, Runner: rebooted, Shim: shim, Launch: e.launchThrough(rebooted), Clock: e.clock})
	if err := j.Start(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	got := rebooted.Lines()
	want := []string{"sysctl -n kern.boottime", "mount -t devfs devfs " + root + "/dev", "devfs -m " + root + "/dev ruleset 4",
		"devfs -m " + root + "/dev rule applyset", "jls --libxo=json -j pod1 vnet"}
	if d := cmp.Diff(want, got[:len(want)]); d != "" {
		t.Fatalf("start after reboot (-want +got):\n%s", d)
	}
}

func TestShimFailureIsPermanent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.fake.On(shim+" jail-shim supervise", sys.Answer{Code: ShimExitPermanent, Stderr: "exec /bin/nope: no such file or directory\n"})
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	e.fake.On("jls --libxo=json -j pod1.web ", jlsAnswer("pod1.web", ContainerParams(Security{}, true)))
	e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true})
	e.j.Create(ctx, ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/nope"}, Root: Root{Path: t.TempDir()}})
	err := e.j.Start(ctx, "web")
	if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("start: %v", err)
	}
	lines := e.fake.Lines()
	if lines[len(lines)-1] != "jail -R pod1.web" {
		t.Fatalf("the jail must go: %q", lines)
	}
	st, _ := e.j.Inspect(ctx, "web")
	if st.State != StateExited || st.ExitCode != 127 || !strings.Contains(st.Message, "no such file") {
		t.Fatalf("status: %+v", st)
	}
}

func TestRctlQuirks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().
		On("rctl -r jail:gone", sys.Answer{Code: 1, Stderr: "rctl: failed to remove rule 'jail:gone': No such process\n"}).
		On("rctl -r jail:bad", sys.Answer{Code: 1, Stderr: "rctl: failed to remove rule 'jail:bad': Operation not permitted\n"}).
		On("rctl -u jail:unknown", sys.Answer{Stdout: "cputime=0\ndatasize=0\nstacksize=0\ncoredumpsize=0\nmemoryuse=0\nmemorylocked=0\nmaxproc=0\nopenfiles=0\nvmemoryuse=0\npseudoterminals=0\nswapuse=0\nnthr=0\nmsgqqueued=0\nmsgqsize=0\nnmsgq=0\nnsem=0\nnsemop=0\nnshm=0\nshmsize=0\nwallclock=0\npcpu=0\nreadbps=0\nwritebps=0\nreadiops=0\nwriteiops=0\n"}).
		On("rctl -u jail:pod1.web", sys.Answer{Stdout: "cputime=12\nmemoryuse=10485760\nmaxproc=3\nopenfiles=96\npcpu=4\n"})
	if err := RemoveRctl(ctx, f, "gone"); err != nil {
		t.Fatalf("rctl -r answering No such process must be success: %v", err)
	}
	if err := RemoveRctl(ctx, f, "bad"); err == nil {
		t.Fatal("other rctl -r failures must be reported")
	}
	u, err := RctlUsage(ctx, f, "unknown")
	if err != nil || u != (Usage{}) {
		t.Fatalf("rctl -u of an unknown jail: %+v %v, want zeros", u, err)
	}
	u, err = RctlUsage(ctx, f, "pod1.web")
	if want := (Usage{CPUTime: 12 * time.Second, MemoryBytes: 10 << 20, Processes: 3, OpenFiles: 96}); err != nil || u != want {
		t.Fatalf("usage %+v %v, want %+v", u, err, want)
	}
	if err := AddRctl(ctx, f, "pod1.web", Resources{CPUMillis: 1500, MemoryBytes: 128 << 20, MaxProc: 20, OpenFiles: 512}); err != nil {
		t.Fatal(err)
	}
	lines := f.Lines()
	want := []string{"rctl -r jail:gone", "rctl -r jail:bad", "rctl -u jail:unknown", "rctl -u jail:pod1.web",
		"rctl -a jail:pod1.web:pcpu:deny=150", "rctl -a jail:pod1.web:maxproc:deny=20",
		"rctl -a jail:pod1.web:openfiles:deny=512", "rctl -a jail:pod1.web:memoryuse:sigkill=134217728/process"}
	if d := cmp.Diff(want, lines); d != "" {
		t.Fatalf("lines (-want +got):\n%s", d)
	}
	// No limits, no rules.
	if r := RctlRules("x", Resources{}); len(r) != 0 {
		t.Fatalf("rules without limits: %v", r)
	}
}

func TestPlatformNoLimits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		answer sys.Answer
		want   bool
	}{
		{sys.Answer{Stdout: "1\n"}, false},
		{sys.Answer{Stdout: "0\n"}, true},
		{sys.Answer{Code: 1, Stderr: "sysctl: unknown oid 'kern.racct.enable'\n"}, true},
	} {
		f := sys.NewFake().On("sysctl -n kern.racct.enable", tc.answer)
		p, err := DetectPlatform(ctx, f)
		if err != nil || p.NoLimits != tc.want {
			t.Errorf("answer %+v: %+v %v, want NoLimits %v", tc.answer, p, err, tc.want)
		}
	}
	f := sys.NewFake().On("sysctl", sys.Answer{Code: 1, Stderr: "sysctl: Operation not permitted"})
	if _, err := DetectPlatform(ctx, f); err == nil {
		t.Fatal("another failure must be reported")
	}
}

func TestLinuxEnablement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mods := []string{"kldload -n linux64", "kldload -n linprocfs", "kldload -n linsysfs", "kldload -n fdescfs", "kldload -n tmpfs"}
	t.Run("fallback brand unset is set to Linux", func(t *testing.T) {
		f := sys.NewFake().On("sysctl -n kern.elf64.fallback_brand", sys.Answer{Stdout: "-1\n"})
		w, err := EnableLinux(ctx, f)
		if err != nil || len(w) != 0 {
			t.Fatalf("%v %v", w, err)
		}
		want := append(append([]string{}, mods...), "sysctl -n kern.elf64.fallback_brand", "sysctl kern.elf64.fallback_brand=3")
		if d := cmp.Diff(want, f.Lines()); d != "" {
			t.Fatalf("(-want +got):\n%s", d)
		}
	})
	t.Run("fallback brand already set is kept with a warning", func(t *testing.T) {
		f := sys.NewFake().On("sysctl -n kern.elf64.fallback_brand", sys.Answer{Stdout: "9\n"})
		w, err := EnableLinux(ctx, f)
		if err != nil || len(w) != 1 || !strings.Contains(w[0], "static Linux programs will not run") {
			t.Fatalf("warnings %q %v", w, err)
		}
		want := append(append([]string{}, mods...), "sysctl -n kern.elf64.fallback_brand")
		if d := cmp.Diff(want, f.Lines()); d != "" {
			t.Fatalf("(-want +got):\n%s", d)
		}
	})
	t.Run("a module that does not load stops it", func(t *testing.T) {
		f := sys.NewFake().On("kldload -n linsysfs", sys.Answer{Code: 1, Stderr: "kldload: can't load linsysfs: No such file or directory"})
		_, err := EnableLinux(ctx, f)
		if err == nil || !strings.Contains(err.Error(), "linsysfs") {
			t.Fatalf("%v", err)
		}
	})
}

func TestNodeModules(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	if err := LoadModules(context.Background(), f, NodeModules); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"kldload -n if_bridge", "kldload -n if_epair", "kldload -n pf"}, f.Lines()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
	f = sys.NewFake().On("kldload -n pf", sys.Answer{Code: 1, Stderr: "kldload: can't load pf: No such file or directory"})
	err := LoadModules(context.Background(), f, NodeModules)
	if err == nil || !strings.Contains(err.Error(), "kldload -n pf") || !strings.Contains(err.Error(), "No such file") {
		t.Fatalf("error %v must name the module and the reason", err)
	}
}

func TestLinuxContainerMounts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true})
	root := t.TempDir()
	e.fake.Reset()
	if err := e.j.Create(ctx, ContainerSpec{ID: "alpine", Pod: "pod1", Linux: true, Command: []string{"/bin/sh"}, Root: Root{Path: root}}); err != nil {
		t.Fatal(err)
	}
	e.wantLines([]string{
		"mount -t devfs devfs " + root + "/dev",
		"devfs -m " + root + "/dev ruleset 4",
		"devfs -m " + root + "/dev rule applyset",
		"mount -t linprocfs linprocfs " + root + "/proc",
		"mount -t linsysfs linsysfs " + root + "/sys",
		"mount -t fdescfs -o linrdlnk fdescfs " + root + "/dev/fd",
		"mount -t tmpfs -o mode=1777 tmpfs " + root + "/.legion-shm",
		"ln -s /.legion-shm " + root + "/dev/shm",
		"devfs -m " + root + "/dev rule apply path shm unhide",
	})
	var names []string
	entries, _ := os.ReadDir(root)
	for _, en := range entries {
		names = append(names, en.Name())
	}
	sort.Strings(names)
	if d := cmp.Diff([]string{".legion-shm", "dev", "proc", "sys"}, names); d != "" {
		t.Fatalf("targets made in the root (-want +got):\n%s", d)
	}
}

func TestMountTargetThroughImageLinkRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true})
	root, host := t.TempDir(), t.TempDir()
	if err := os.Symlink(host, filepath.Join(root, "data")); err != nil {
		t.Fatal(err)
	}
	e.fake.Reset()
	err := e.j.Create(ctx, ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/web"}, Root: Root{Path: root},
		Mounts: []Mount{{Kind: MountNullfs, Source: t.TempDir(), Target: "/data/x"}}})
	if !errors.Is(err, ErrSymlinkInPath) {
		t.Fatalf("create: %v, want ErrSymlinkInPath", err)
	}
	for _, l := range e.fake.Lines() {
		if strings.HasPrefix(l, "mount_nullfs") {
			t.Fatalf("mounted through a link: %q", e.fake.Lines())
		}
	}
	if _, err := e.j.Inspect(ctx, "web"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a refused container must leave no record: %v", err)
	}
}

func TestStandaloneMemberAndAnnotations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	root := t.TempDir()
	sec := Security{Allow: []string{AllowSysvipc}}
	e.fake.On("jls --libxo=json -j solo ", jlsAnswer("solo", ContainerParams(sec, false)))
	if err := e.j.Create(ctx, ContainerSpec{ID: "solo", Command: []string{"/bin/sh"}, Root: Root{Path: root}, Security: sec}); err != nil {
		t.Fatal(err)
	}
	e.fake.Reset()
	if err := e.j.Start(ctx, "solo"); err != nil {
		t.Fatal(err)
	}
	// Its own jail on the host's addresses, with a SysV namespace of its own.
	e.wantLines([]string{
		"jail -c name=solo path=" + root + " host.hostname=solo persist ip4=inherit ip6=inherit devfs_ruleset=4 allow.raw_sockets=0 allow.chflags=0 allow.mlock=0 allow.mount=0 sysvmsg=new sysvsem=new sysvshm=new enforce_statfs=2 securelevel=2",
		"jls --libxo=json -j solo " + readBackNames + " securelevel",
		shim + " jail-shim supervise " + filepath.Join(e.data, "jails", "solo"),
	})

	// The pod's shape given as the agent's annotations.
	e.fake.On("jls --libxo=json -j p2 ", jlsAnswer("p2", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	if err := e.j.Create(ctx, ContainerSpec{ID: "p2", Annotations: map[string]string{AnnotationVnet: "new"}}); err != nil {
		t.Fatal(err)
	}
	if err := e.j.Create(ctx, ContainerSpec{ID: "m", Annotations: map[string]string{AnnotationParentJail: "p2"}, Command: []string{"/bin/sh"}, Root: Root{Path: t.TempDir()}}); err != nil {
		t.Fatal(err)
	}
	st, err := e.j.Inspect(ctx, "m")
	if err != nil || st.Pod != "p2" {
		t.Fatalf("member by annotation: %+v %v", st, err)
	}
	if st, _ := e.j.Inspect(ctx, "p2"); !st.Infra || st.State != StateRunning {
		t.Fatalf("pod by annotation: %+v", st)
	}
}

func TestExecAndUsageLines(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	startedMember(t, e, ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/web"}, Root: Root{Path: t.TempDir()}})
	e.fake.On(shim+" jail-shim exec", sys.Answer{Stdout: "hi\n", Stderr: "warn\n", Code: 3})
	e.fake.On("rctl -u jail:pod1.web", sys.Answer{Stdout: "cputime=2\nmemoryuse=99999999\nmaxproc=2\nopenfiles=10\n"})
	var out, errb strings.Builder
	code, err := e.j.Exec(ctx, "web", ExecSpec{Command: []string{"cat", "/etc/motd"}, User: "www", WorkDir: "/srv", Env: []string{"A=1"},
		Stdin: strings.NewReader("input"), Stdout: &out, Stderr: &errb})
	if err != nil || code != 3 || out.String() != "hi\n" || errb.String() != "warn\n" {
		t.Fatalf("exec: %d %v %q %q", code, err, out.String(), errb.String())
	}
	calls := e.fake.Calls()
	last := calls[len(calls)-1]
	if got, want := last.String(), shim+" jail-shim exec "+filepath.Join(e.data, "jails", "web")+" -user www -workdir /srv -env A=1 -- cat /etc/motd"; got != want {
		t.Fatalf("exec line\n got %s\nwant %s", got, want)
	}
	if string(last.Stdin) != "input" {
		t.Fatalf("exec stdin %q", last.Stdin)
	}
	// Usage: rctl's accounting, with memory from the per-page count.
	e.j.cfg.Memory = constCounter(12345)
	u, err := e.j.Usage(ctx, "web")
	if want := (Usage{CPUTime: 2 * time.Second, MemoryBytes: 12345, Processes: 2, OpenFiles: 10}); err != nil || u != want {
		t.Fatalf("usage %+v %v, want %+v", u, err, want)
	}
	if _, err := e.j.Exec(ctx, "pod1", ExecSpec{Command: []string{"sh"}}); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("no session reaches the pod jail: %v", err)
	}
}

type constCounter int64

func (c constCounter) JailMemory(context.Context, string) (int64, error) { return int64(c), nil }

func TestStartReplacesALeftoverJail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	root := t.TempDir()
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	e.fake.On("jls --libxo=json -j pod1.web ", jlsAnswer("pod1.web", ContainerParams(Security{}, true)))
	e.fake.Once("jail -c name=pod1.web", sys.Answer{Code: 1, Stderr: "jail: pod1.web: jail 7 already exists\n"})
	e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true})
	e.j.Create(ctx, ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/bin/web"}, Root: Root{Path: root}})
	e.fake.Reset()
	if err := e.j.Start(ctx, "web"); err != nil {
		t.Fatal(err)
	}
	lines := e.fake.Lines()
	if !strings.HasPrefix(lines[0], "jail -c name=pod1.web") || lines[1] != "jail -R pod1.web" || !strings.HasPrefix(lines[2], "jail -c name=pod1.web") {
		t.Fatalf("lines %q: want create, remove the leftover, create again", lines)
	}
}

func TestStartupOrder(t *testing.T) {
	t.Parallel()
	f := sys.NewFake().
		On("sysctl -n kern.elf64.fallback_brand", sys.Answer{Stdout: "3\n"}).
		On("sysctl -n kern.racct.enable", sys.Answer{Stdout: "0\n"})
	p, warnings, err := Startup(context.Background(), f, true)
	if err != nil || !p.NoLimits || len(warnings) != 1 || !strings.Contains(warnings[0], "platform.noLimits") {
		t.Fatalf("startup: %+v %q %v", p, warnings, err)
	}
	want := []string{"kldload -n if_bridge", "kldload -n if_epair", "kldload -n pf",
		"kldload -n linux64", "kldload -n linprocfs", "kldload -n linsysfs", "kldload -n fdescfs", "kldload -n tmpfs",
		"sysctl -n kern.elf64.fallback_brand", "sysctl -n kern.racct.enable"}
	if d := cmp.Diff(want, f.Lines()); d != "" {
		t.Fatalf("(-want +got):\n%s", d)
	}
}

func TestLimitedAndNoLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	startedMember(t, e, ContainerSpec{ID: "db", Pod: "pod1", Command: []string{"/bin/db"}, Root: Root{Path: t.TempDir()},
		Resources: Resources{MemoryBytes: 256 << 20}})
	e.j.Create(ctx, ContainerSpec{ID: "idle", Pod: "pod1", Command: []string{"/bin/x"}, Root: Root{Path: t.TempDir()},
		Resources: Resources{MemoryBytes: 1 << 20}})
	if d := cmp.Diff([]Limited{{Jail: "pod1.db", Limit: 256 << 20}}, e.j.Limited(ctx)); d != "" {
		t.Fatalf("limited (-want +got):\n%s", d)
	}
	j, _ := NewJails(Config{DataDir: t.TempDir(), Runner: e.fake, Shim: shim, NoLimits: true})
	err := j.Create(ctx, ContainerSpec{ID: "x", Command: []string{"/bin/x"}, Root: Root{Path: t.TempDir()}, Resources: Resources{CPUMillis: 100}})
	if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "kern.racct.enable") {
		t.Fatalf("a container with limits on a node without them: %v", err)
	}
}

func TestFindAndRootRequired(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.fake.On("jls --libxo=json -j ", jlsAnswer("x", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	for _, id := range []string{"pod-abc", "pod-abd", "web-1"} {
		if err := e.j.Create(ctx, ContainerSpec{ID: id, Infra: true}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := e.j.Find(ctx, "web"); err != nil || st.ID != "web-1" {
		t.Fatalf("find by prefix: %+v %v", st, err)
	}
	if st, err := e.j.Find(ctx, "pod-abd"); err != nil || st.ID != "pod-abd" {
		t.Fatalf("find by id: %+v %v", st, err)
	}
	if _, err := e.j.Find(ctx, "pod-ab"); !errors.Is(err, ErrAmbiguous) || !strings.Contains(err.Error(), "pod-abc, pod-abd") {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	if _, err := e.j.Find(ctx, "zzz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no match: %v", err)
	}
	err := e.j.Create(ctx, ContainerSpec{ID: "noroot", Pod: "web-1", Command: []string{"/bin/sh"}})
	if err == nil || !strings.Contains(err.Error(), "root.path") {
		t.Fatalf("a member without a root: %v", err)
	}
}

// After a reboot nothing is mounted: umount refuses each path in the words
// of umount.c, and Remove must still go through, or the container could
// never be removed. A file mounted over a file (a secret, resolv.conf)
// is "unknown file system", a directory "not a file system root
// directory", a path gone "statfs: No such file or directory".
func TestRemoveAfterRebootToleratesWhatIsNotMounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	root := t.TempDir()
	volume := t.TempDir()
	secret := filepath.Join(t.TempDir(), "db-password")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	if err := e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	web := ContainerSpec{ID: "web", Pod: "pod1", Command: []string{"/usr/local/bin/web"}, Root: Root{Path: root},
		Mounts: []Mount{
			{Kind: MountNullfs, Source: volume, Target: "/var/db/web"},
			{Kind: MountNullfs, Source: secret, Target: "/run/secrets/db-password", ReadOnly: true},
			{Kind: MountNullfs, Source: secret, Target: "/etc/gone", ReadOnly: true},
		}}
	if err := e.j.Create(ctx, web); err != nil {
		t.Fatalf("create web: %v", err)
	}
	if err := os.Remove(filepath.Join(root, "etc/gone")); err != nil {
		t.Fatal(err)
	}
	e.fake.On("umount -f "+root+"/dev", sys.UmountNotRoot(root+"/dev")).
		On("umount -f "+root+"/var/db/web", sys.UmountNotRoot(root+"/var/db/web")).
		On("umount -f "+root+"/run/secrets/db-password", sys.UmountNotMounted(root+"/run/secrets/db-password")).
		On("umount -f "+root+"/etc/gone", sys.UmountMissing(root+"/etc/gone"))
	writeExit(t, e.data, "web", ExitInfo{Code: 137, Signal: "KILL"})
	e.fake.Reset()
	if err := e.j.Remove(ctx, "web"); err != nil {
		t.Fatalf("remove after a reboot: %v", err)
	}
	var umounts int
	for _, l := range e.fake.Lines() {
		if strings.HasPrefix(l, "umount -f ") {
			umounts++
		}
	}
	if umounts != 4 {
		t.Fatalf("want 4 unmounts tried, got %q", e.fake.Lines())
	}
}
