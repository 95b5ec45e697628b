package jail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legionbsd/legion/internal/sys"
)

// Annotations the jail runtime reads, as the agent's pods carry them.
const (
	// AnnotationVnet = "new" marks an infra container.
	AnnotationVnet = "org.freebsd.jail.vnet"
	// AnnotationParentJail names the infra container a member joins.
	AnnotationParentJail = "org.freebsd.parentJail"
)

// Defaults of Config.
const (
	DefaultChildrenMax = 64
	// ShimMargin is how long past the grace period the runtime waits for
	// the supervisor's exit record before acting itself.
	ShimMargin = 5 * time.Second
	pollEvery  = 100 * time.Millisecond // waiting for an exit record
	eventPoll  = 500 * time.Millisecond // looking for ended runs to report
)

// Config sets up the FreeBSD jail runtime.
type Config struct {
	DataDir string     // containers are recorded under DataDir/jails/<id>
	Runner  sys.Runner // every FreeBSD command goes through it
	// Shim is the legion binary, run as `Shim jail-shim start|exec ...`.
	Shim        string
	ChildrenMax int                // of a pod's jail; DefaultChildrenMax when zero
	Clock       Clock              // RealClock when nil
	Alive       func(pid int) bool // whether a supervisor lives; ProcessAlive when nil
	Memory      MemoryCounter      // the per-page count of 6.3; nil: rctl's memoryuse
	// Spawner, when set, runs exec sessions with their streams attached
	// as they go; without it exec goes through Runner, which hands back
	// the output when the command ends.
	Spawner Spawner
	// NoLimits: rctl is off on this host (Platform.NoLimits); a container
	// with limits is refused rather than run without them.
	NoLimits bool
	Log      *slog.Logger
}

// Jails is the FreeBSD jail runtime: a pod is a persistent VNET jail with
// no process, each container a child jail <infra>.<id> on its prepared
// root, supervised by `legion jail-shim`.
type Jails struct {
	cfg     Config
	records Records
	clock   Clock
	log     *slog.Logger

	mu   sync.Mutex
	boot int64
	subs []chan Event
	// watching: someone subscribed to events; reported: the finish time
	// of the last died event sent per container.
	watching bool
	reported map[string]time.Time
	starting map[string]bool // its died event waits for its started event
	vnetOK   map[string]bool // infra jails whose VNET was checked
	wg       sync.WaitGroup
	podMu    sync.Mutex // serialises changes of pod jails' parameters
}

var _ Runtime = (*Jails)(nil)

// NewJails returns the runtime; it finds containers recorded by an
// earlier run in DataDir (see Adopt).
func NewJails(cfg Config) (*Jails, error) {
	if cfg.DataDir == "" || cfg.Runner == nil || cfg.Shim == "" {
		return nil, errors.New("jail runtime: DataDir, Runner and Shim are required")
	}
	if cfg.ChildrenMax == 0 {
		cfg.ChildrenMax = DefaultChildrenMax
	}
	j := &Jails{cfg: cfg, records: Records{Dir: filepath.Join(cfg.DataDir, "jails")},
		clock: cfg.Clock, log: cfg.Log, vnetOK: map[string]bool{}, reported: map[string]time.Time{}, starting: map[string]bool{}}
	if j.clock == nil {
		j.clock = RealClock{}
	}
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	if j.cfg.Alive == nil {
		j.cfg.Alive = ProcessAlive
	}
	return j, nil
}

// Wait waits for the goroutines of Events and Logs callers whose contexts
// have ended.
func (j *Jails) Wait() { j.wg.Wait() }

var boottimeRE = regexp.MustCompile(`sec = (\d+)`)

// bootTime reads kern.boottime once: a run from another boot is over.
func (j *Jails) bootTime(ctx context.Context) (int64, error) {
	j.mu.Lock()
	b := j.boot
	j.mu.Unlock()
	if b != 0 {
		return b, nil
	}
	res, err := sys.Run(ctx, j.cfg.Runner, "sysctl", "-n", "kern.boottime")
	if err != nil {
		return 0, fmt.Errorf("boot time: %w", err)
	}
	m := boottimeRE.FindSubmatch(res.Stdout)
	if m == nil {
		return 0, fmt.Errorf("boot time: kern.boottime %q: expected { sec = N, usec = N }", res.Stdout)
	}
	b, _ = strconv.ParseInt(string(m[1]), 10, 64)
	j.mu.Lock()
	j.boot = b
	j.mu.Unlock()
	return b, nil
}

func (j *Jails) run(ctx context.Context, name string, args ...string) (sys.Result, error) {
	return sys.Run(ctx, j.cfg.Runner, name, args...)
}

func (j *Jails) emit(typ string, spec ContainerSpec, code int) {
	ev := Event{Type: typ, ID: spec.ID, Labels: spec.Labels, ExitCode: code, Time: j.clock.Now()}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range j.subs {
		select {
		case s <- ev:
		default: // a subscriber that does not read loses events; the agent reconciles
		}
	}
}

// jailName is the jail a container runs in.
func jailName(spec ContainerSpec) string {
	if spec.Pod != "" {
		return spec.Pod + "." + spec.ID
	}
	return spec.ID
}

func paramArgs(params []Param) []string {
	out := make([]string, len(params))
	for i, p := range params {
		out[i] = p.String()
	}
	return out
}

// readBack reads a jail's parameters with jls and compares them.
func (j *Jails) readBack(ctx context.Context, name string, want []Param) error {
	args := append([]string{"--libxo=json", "-j", name}, ParamNames(want)...)
	res, err := j.run(ctx, "jls", args...)
	if err != nil {
		return fmt.Errorf("read back jail %s: %w", name, err)
	}
	got, err := ParseJLS(res.Stdout)
	if err != nil {
		return fmt.Errorf("read back jail %s: %w", name, err)
	}
	if diffs := CompareParams(want, got); len(diffs) > 0 {
		return fmt.Errorf("jail %s: %w: %s", name, ErrProfileMismatch, strings.Join(diffs, "; "))
	}
	return nil
}

func (j *Jails) removeJail(ctx context.Context, name string) error {
	_, err := j.run(ctx, "jail", "-r", name)
	if err != nil && !sys.IsExit(err, "not found") {
		return fmt.Errorf("remove jail %s: %w", name, err)
	}
	return nil
}

// Create implements Runtime.
func (j *Jails) Create(ctx context.Context, spec ContainerSpec) error {
	if spec.Annotations[AnnotationVnet] == "new" {
		spec.Infra = true
	}
	if p := spec.Annotations[AnnotationParentJail]; p != "" && spec.Pod == "" {
		spec.Pod = p
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if err := spec.Security.Validate(); err != nil {
		return fmt.Errorf("container spec %s: %w", spec.ID, err)
	}
	if !spec.Infra && !filepath.IsAbs(spec.Root.Path) {
		return fmt.Errorf("container spec %s: root.path %q: expected the absolute path of the prepared root", spec.ID, spec.Root.Path)
	}
	if j.cfg.NoLimits && spec.Resources.Limited() {
		return fmt.Errorf("create %s: %w: no limits on this node (kern.racct.enable)", spec.ID, ErrPermanent)
	}
	var infra Record
	if spec.Pod != "" {
		var err error
		infra, err = j.records.Get(spec.Pod)
		if err != nil || !infra.Spec.Infra {
			return fmt.Errorf("create %s: pod %s: %w", spec.ID, spec.Pod, ErrNotFound)
		}
	}
	boot, err := j.bootTime(ctx)
	if err != nil {
		return err
	}
	rec := Record{Spec: spec, Jail: jailName(spec), CreatedAt: j.clock.Now()}
	if spec.Infra {
		rec.Params = InfraParams([]Security{spec.Security})
	} else {
		rec.Params = ContainerParams(spec.Security, spec.Pod != "")
	}
	if err := j.records.Create(rec); err != nil {
		return err
	}
	fail := func(err error) error {
		j.records.Remove(spec.ID)
		return err
	}
	if spec.Infra {
		if err := j.createInfra(ctx, rec); err != nil {
			return fail(err)
		}
		rec.MountBoot = boot
	} else {
		if spec.Pod != "" {
			if err := j.widenInfra(ctx, infra, spec.Security); err != nil {
				return fail(err)
			}
		}
		if err := j.mountAll(ctx, rec); err != nil {
			return fail(err)
		}
		rec.MountBoot = boot
	}
	if err := j.records.Put(rec); err != nil {
		return fail(err)
	}
	j.emit(EventCreated, spec, 0)
	return nil
}

// createInfra makes a pod's jail: persistent, its own VNET, on /var/empty
// so it never sees the host's files, with no process; and checks it.
func (j *Jails) createInfra(ctx context.Context, rec Record) error {
	args := []string{"-c", "name=" + rec.Jail, "persist", "vnet=new", "path=/var/empty",
		"host.hostname=" + rec.Spec.ID, "children.max=" + strconv.Itoa(j.cfg.ChildrenMax)}
	args = append(args, paramArgs(rec.Params)...)
	if _, err := j.run(ctx, "jail", args...); err != nil {
		return fmt.Errorf("create pod jail %s: %w", rec.Jail, err)
	}
	want := append([]Param{{"vnet", "new"}}, rec.Params...)
	if err := j.readBack(ctx, rec.Jail, want); err != nil {
		j.removeJail(ctx, rec.Jail)
		return fmt.Errorf("pod %s refused: %w", rec.Spec.ID, err)
	}
	j.mu.Lock()
	j.vnetOK[rec.Jail] = true
	j.mu.Unlock()
	return nil
}

// widenInfra gives the pod's jail what a new member asks for on top of
// what its members have: a child may have only what its parent has.
func (j *Jails) widenInfra(ctx context.Context, infra Record, add Security) error {
	j.podMu.Lock() // one read-modify-write of a pod's parameters at a time
	defer j.podMu.Unlock()
	if fresh, err := j.records.Get(infra.Spec.ID); err == nil {
		infra = fresh
	}
	secs := []Security{infra.Spec.Security, add}
	ids, err := j.records.IDs()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if r, err := j.records.Get(id); err == nil && r.Spec.Pod == infra.Spec.ID {
			secs = append(secs, r.Spec.Security)
		}
	}
	want := InfraParams(secs)
	var changed []Param
	for i, p := range want {
		if i >= len(infra.Params) || infra.Params[i] != p {
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	args := append([]string{"-m", "name=" + infra.Jail}, paramArgs(changed)...)
	if _, err := j.run(ctx, "jail", args...); err != nil {
		return fmt.Errorf("loosen pod jail %s for a member: %w", infra.Jail, err)
	}
	if err := j.readBack(ctx, infra.Jail, want); err != nil {
		return fmt.Errorf("pod %s refused: %w", infra.Spec.ID, err)
	}
	infra.Params = want
	return j.records.Put(infra)
}

// mountPoint is one mount the runtime makes in a container's root.
type mountPoint struct {
	path string   // host path of the target
	cmd  []string // the mount command
	post [][]string
}

// mounts lists a container's mounts in order: devfs (ruleset 4) made by
// the runtime, the Linux file systems, then the spec's.
func (j *Jails) mounts(rec Record, makeTargets bool) ([]mountPoint, error) {
	root := rec.Spec.Root.Path
	target := func(t string, file bool) (string, error) {
		if !makeTargets {
			return strings.TrimSuffix(root, "/") + filepath.Clean(t), nil
		}
		return MakeTarget(root, t, file)
	}
	var out []mountPoint
	dev, err := target("/dev", false)
	if err != nil {
		return nil, err
	}
	rs := strconv.Itoa(DevfsRuleset)
	out = append(out, mountPoint{path: dev, cmd: []string{"mount", "-t", "devfs", "devfs", dev},
		post: [][]string{{"devfs", "-m", dev, "ruleset", rs}, {"devfs", "-m", dev, "rule", "applyset"}}})
	if rec.Spec.Linux {
		for _, m := range []struct{ fs, at, opts string }{
			{"linprocfs", "/proc", ""}, {"linsysfs", "/sys", ""},
		} {
			p, err := target(m.at, false)
			if err != nil {
				return nil, err
			}
			out = append(out, mountPoint{path: p, cmd: []string{"mount", "-t", m.fs, m.fs, p}})
		}
		// /dev/fd is devfs's own directory, so no target is made for it.
		fd := dev + "/fd"
		out = append(out, mountPoint{path: fd, cmd: []string{"mount", "-t", "fdescfs", "-o", "linrdlnk", "fdescfs", fd}})
		// Nothing mounts on a devfs directory, so /dev/shm is a link, shown
		// in this devfs alone, to a tmpfs in the root.
		shm, err := target("/.legion-shm", false)
		if err != nil {
			return nil, err
		}
		out = append(out, mountPoint{path: shm, cmd: []string{"mount", "-t", "tmpfs", "-o", "mode=1777", "tmpfs", shm},
			post: [][]string{{"ln", "-s", "/.legion-shm", dev + "/shm"}, {"devfs", "-m", dev, "rule", "apply", "path", "shm", "unhide"}}})
	}
	for i, m := range rec.Spec.Mounts {
		file := false
		if m.Kind == MountNullfs && makeTargets {
			st, err := os.Stat(m.Source)
			if err != nil {
				return nil, fmt.Errorf("mounts[%d].source %s: %w", i, m.Source, err)
			}
			file = !st.IsDir()
		}
		p, err := target(m.Target, file)
		if err != nil {
			return nil, fmt.Errorf("mounts[%d]: %w", i, err)
		}
		var cmd []string
		switch m.Kind {
		case MountNullfs:
			cmd = []string{"mount_nullfs"}
			if m.ReadOnly {
				cmd = append(cmd, "-o", "ro")
			}
			cmd = append(cmd, m.Source, p)
		case MountTmpfs:
			cmd = []string{"mount", "-t", "tmpfs"}
			if m.ReadOnly {
				cmd = append(cmd, "-o", "ro")
			}
			cmd = append(cmd, "tmpfs", p)
		case MountDevfs:
			cmd = []string{"mount", "-t", "devfs", "devfs", p}
		}
		out = append(out, mountPoint{path: p, cmd: cmd})
	}
	return out, nil
}

func (j *Jails) mountAll(ctx context.Context, rec Record) error {
	mps, err := j.mounts(rec, true)
	if err != nil {
		return fmt.Errorf("container %s: %w", rec.Spec.ID, err)
	}
	undo := func(n int) {
		for i := n - 1; i >= 0; i-- {
			j.run(ctx, "umount", "-f", mps[i].path)
		}
	}
	for i, mp := range mps {
		if _, err := j.run(ctx, mp.cmd[0], mp.cmd[1:]...); err != nil {
			undo(i)
			return fmt.Errorf("container %s: mount %s: %w", rec.Spec.ID, mp.path, err)
		}
		for _, c := range mp.post {
			if _, err := j.run(ctx, c[0], c[1:]...); err != nil {
				undo(i + 1)
				return fmt.Errorf("container %s: %w", rec.Spec.ID, err)
			}
		}
	}
	return nil
}

// unmountAll unmounts in reverse order, forcibly, and goes on past
// failures (something already unmounted), returning the first.
func (j *Jails) unmountAll(ctx context.Context, rec Record) error {
	mps, err := j.mounts(rec, false)
	if err != nil {
		return err
	}
	var first error
	for i := len(mps) - 1; i >= 0; i-- {
		_, err := j.run(ctx, "umount", "-f", mps[i].path)
		if err != nil && !sys.IsExit(err, "not a file system") && !sys.IsExit(err, "No such file") && first == nil {
			first = fmt.Errorf("container %s: unmount %s: %w", rec.Spec.ID, mps[i].path, err)
		}
	}
	return first
}

// checkVnet makes sure a pod's jail has a network stack of its own before
// a member starts: one with vnet=inherit would share the host's.
func (j *Jails) checkVnet(ctx context.Context, infraJail string) error {
	j.mu.Lock()
	ok := j.vnetOK[infraJail]
	j.mu.Unlock()
	if ok {
		return nil
	}
	if err := j.readBack(ctx, infraJail, []Param{{"vnet", "new"}}); err != nil {
		return fmt.Errorf("%w: pod jail %s has no VNET of its own: %w", ErrPermanent, infraJail, err)
	}
	j.mu.Lock()
	j.vnetOK[infraJail] = true
	j.mu.Unlock()
	return nil
}

func (j *Jails) status(ctx context.Context, rec Record) (ContainerStatus, error) {
	boot, err := j.bootTime(ctx)
	if err != nil {
		return ContainerStatus{}, err
	}
	run, hasRun, err := j.records.Run(rec.Spec.ID)
	if err != nil {
		return ContainerStatus{}, err
	}
	exit, hasExit, err := j.records.Exit(rec.Spec.ID)
	if err != nil {
		return ContainerStatus{}, err
	}
	return Status(rec, run, hasRun, exit, hasExit, boot, j.cfg.Alive), nil
}

// Start implements Runtime.
func (j *Jails) Start(ctx context.Context, id string) error {
	rec, err := j.records.Get(id)
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		return nil
	}
	st, err := j.status(ctx, rec)
	if err != nil {
		return err
	}
	if st.State == StateRunning {
		return nil
	}
	j.noteDeath(st)
	boot, err := j.bootTime(ctx)
	if err != nil {
		return err
	}
	dir := j.records.Path(id)
	os.Remove(filepath.Join(dir, ExitFile))
	os.Remove(filepath.Join(dir, StopFile))
	if err := WriteJSON(filepath.Join(dir, RunFile), RunInfo{Boot: boot, StartedAt: j.clock.Now()}); err != nil {
		return err
	}
	failed := func(code int, err error) error {
		WriteJSON(filepath.Join(dir, ExitFile), ExitInfo{Code: code, FinishedAt: j.clock.Now(), Message: err.Error()})
		return fmt.Errorf("start %s: %w", id, err)
	}
	if rec.MountBoot != boot { // a reboot dropped the mounts
		if err := j.mountAll(ctx, rec); err != nil {
			return failed(255, err)
		}
		rec.MountBoot = boot
		if err := j.records.Put(rec); err != nil {
			return failed(255, err)
		}
	}
	if rec.Spec.Pod != "" {
		if err := j.checkVnet(ctx, rec.Spec.Pod); err != nil {
			return failed(255, err)
		}
	}
	args := []string{"-c", "name=" + rec.Jail, "path=" + rec.Spec.Root.Path, "host.hostname=" + id,
		"persist", "ip4=inherit", "ip6=inherit", "devfs_ruleset=" + strconv.Itoa(DevfsRuleset)}
	args = append(args, paramArgs(rec.Params)...)
	_, err = j.run(ctx, "jail", args...)
	if sys.IsExit(err, "already exists") {
		// Left by a run whose supervisor died before removing it.
		if err := j.removeJail(ctx, rec.Jail); err != nil {
			return failed(255, err)
		}
		_, err = j.run(ctx, "jail", args...)
	}
	if err != nil {
		return failed(255, fmt.Errorf("create jail %s: %w", rec.Jail, err))
	}
	if err := j.readBack(ctx, rec.Jail, rec.Params); err != nil {
		j.removeJail(ctx, rec.Jail)
		return failed(255, fmt.Errorf("%w: pod refused: %w", ErrPermanent, err))
	}
	if err := AddRctl(ctx, j.cfg.Runner, rec.Jail, rec.Spec.Resources); err != nil {
		j.removeJail(ctx, rec.Jail)
		return failed(255, err)
	}
	j.mu.Lock()
	j.starting[id] = true
	j.mu.Unlock()
	defer func() {
		j.mu.Lock()
		delete(j.starting, id)
		j.mu.Unlock()
		if st, err := j.status(ctx, rec); err == nil {
			j.noteDeath(st) // a run that ended already
		}
	}()
	// The start front end forks the supervisor, which outlives it: cut
	// short by the caller's context it would leave a supervisor whose
	// start no record holds. It bounds its own wait by waitTimeout.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*waitTimeout)
	defer cancel()
	if _, err := j.run(sctx, j.cfg.Shim, "jail-shim", "start", dir); err != nil {
		j.removeJail(ctx, rec.Jail)
		var ee *sys.ExitError
		if errors.As(err, &ee) && (ee.Code == ShimExitPermanent) {
			return failed(127, fmt.Errorf("%w: %s", ErrPermanent, strings.TrimSpace(ee.Stderr)))
		}
		return failed(255, err)
	}
	j.emit(EventStarted, rec.Spec, 0)
	return nil
}

// waitExit polls for a run's exit record until d has passed.
func (j *Jails) waitExit(ctx context.Context, id string, d time.Duration) (bool, error) {
	deadline := j.clock.Now().Add(d)
	for {
		if _, ok, err := j.records.Exit(id); ok || err != nil {
			return ok, err
		}
		if !j.clock.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-j.clock.After(pollEvery):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Stop implements Runtime: the supervisor sends the stop signal, waits the
// grace period and removes the jail. Should it not report, the runtime
// removes the jail itself.
func (j *Jails) Stop(ctx context.Context, id string, grace time.Duration) error {
	rec, err := j.records.Get(id)
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		return nil
	}
	st, err := j.status(ctx, rec)
	if err != nil || st.State != StateRunning {
		return err
	}
	if grace < 0 {
		grace = rec.Spec.Grace()
	}
	run, _, err := j.records.Run(id)
	if err != nil {
		return err
	}
	dir := j.records.Path(id)
	if err := WriteJSON(filepath.Join(dir, StopFile), StopRequest{Grace: grace}); err != nil {
		return err
	}
	if run.ShimPid != 0 {
		if _, err := j.run(ctx, "kill", "-s", "TERM", strconv.Itoa(run.ShimPid)); err != nil {
			j.log.Warn("supervisor did not take the stop request", "container", id, "err", err)
		}
	}
	if ok, err := j.waitExit(ctx, id, grace+ShimMargin); ok || err != nil {
		return err
	}
	return j.kill(ctx, rec)
}

// kill removes the container's jail, ending everything in it, and writes
// the exit record if the supervisor does not.
func (j *Jails) kill(ctx context.Context, rec Record) error {
	if err := j.removeJail(ctx, rec.Jail); err != nil {
		return err
	}
	ok, err := j.waitExit(ctx, rec.Spec.ID, ShimMargin)
	if ok || err != nil {
		return err
	}
	return WriteJSON(filepath.Join(j.records.Path(rec.Spec.ID), ExitFile), ExitInfo{
		Code: 137, Signal: "KILL", FinishedAt: j.clock.Now(),
		Message: "jail removed; the supervisor wrote no exit status",
	})
}

// Remove implements Runtime.
func (j *Jails) Remove(ctx context.Context, id string) error {
	rec, err := j.records.Get(id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		ids, err := j.records.IDs()
		if err != nil {
			return err
		}
		for _, mid := range ids {
			if m, err := j.records.Get(mid); err == nil && m.Spec.Pod == id {
				if err := j.Remove(ctx, mid); err != nil {
					return err
				}
			}
		}
		if err := j.removeJail(ctx, rec.Jail); err != nil {
			return err
		}
		j.mu.Lock()
		delete(j.vnetOK, rec.Jail)
		j.mu.Unlock()
	} else {
		st, err := j.status(ctx, rec)
		if err != nil {
			return err
		}
		if st.State == StateRunning {
			// The supervisor ends it at once and reports; should it not,
			// Stop removes the jail itself.
			if err := j.Stop(ctx, id, 0); err != nil {
				return err
			}
			if st, err = j.status(ctx, rec); err != nil {
				return err
			}
		}
		j.noteDeath(st)
		if err := j.unmountAll(ctx, rec); err != nil {
			return err
		}
		if err := RemoveRctl(ctx, j.cfg.Runner, rec.Jail); err != nil {
			return err
		}
	}
	if err := j.records.Remove(id); err != nil {
		return err
	}
	j.mu.Lock()
	delete(j.reported, id)
	j.mu.Unlock()
	j.emit(EventRemoved, rec.Spec, 0)
	return nil
}

// Inspect implements Runtime.
func (j *Jails) Inspect(ctx context.Context, id string) (ContainerStatus, error) {
	rec, err := j.records.Get(id)
	if err != nil {
		return ContainerStatus{}, err
	}
	return j.status(ctx, rec)
}

// List implements Runtime.
func (j *Jails) List(ctx context.Context, selector map[string]string) ([]ContainerStatus, error) {
	ids, err := j.records.IDs()
	if err != nil {
		return nil, err
	}
	var out []ContainerStatus
	for _, id := range ids {
		rec, err := j.records.Get(id)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		if !MatchLabels(rec.Spec.Labels, selector) {
			continue
		}
		st, err := j.status(ctx, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ContainerStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Events implements Runtime. Ends of runs are found by polling the
// records (and checked before a container is started again or removed, so
// its died event comes first); a run that ended while no one subscribed is
// left to the agent's reconciliation.
func (j *Jails) Events(ctx context.Context) (<-chan Event, error) {
	ch := make(chan Event, 1024)
	j.mu.Lock()
	first := !j.watching
	j.watching = true
	j.mu.Unlock()
	if first {
		l, err := j.List(ctx, nil)
		if err != nil {
			return nil, err
		}
		j.mu.Lock()
		for _, st := range l {
			if st.State == StateExited {
				j.reported[st.ID] = st.FinishedAt
			}
		}
		j.mu.Unlock()
	}
	j.mu.Lock()
	j.subs = append(j.subs, ch)
	j.mu.Unlock()
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer func() {
			j.mu.Lock()
			j.subs = slices.DeleteFunc(j.subs, func(s chan Event) bool { return s == ch })
			j.mu.Unlock()
			close(ch)
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-j.clock.After(eventPoll):
			}
			l, err := j.List(ctx, nil)
			if err != nil {
				continue
			}
			for _, st := range l {
				j.noteDeath(st)
			}
		}
	}()
	return ch, nil
}

// noteDeath emits a died event for a run that ended, once.
func (j *Jails) noteDeath(st ContainerStatus) {
	if st.State != StateExited || st.Infra {
		return
	}
	j.mu.Lock()
	if !j.watching || j.starting[st.ID] {
		j.mu.Unlock()
		return
	}
	if t, ok := j.reported[st.ID]; ok && t.Equal(st.FinishedAt) {
		j.mu.Unlock()
		return
	}
	j.reported[st.ID] = st.FinishedAt
	j.mu.Unlock()
	j.emit(EventDied, ContainerSpec{ID: st.ID, Labels: st.Labels}, st.ExitCode)
}

// Exec implements Runtime: the supervisor's exec mode enters the jail as
// the container's process does. Output is collected, then written.
func (j *Jails) Exec(ctx context.Context, id string, spec ExecSpec) (int, error) {
	rec, err := j.records.Get(id)
	if err != nil {
		return -1, err
	}
	st, err := j.status(ctx, rec)
	if err != nil {
		return -1, err
	}
	if rec.Spec.Infra || st.State != StateRunning {
		return -1, fmt.Errorf("exec in %s: %w", id, ErrNotRunning)
	}
	if spec.TTY && j.cfg.Spawner == nil {
		return -1, fmt.Errorf("exec in %s: a terminal needs a Spawner (the runner cannot stream)", id)
	}
	args := []string{"jail-shim", "exec", j.records.Path(id)}
	if spec.TTY {
		args = append(args, "-tty")
	}
	if spec.User != "" {
		args = append(args, "-user", spec.User)
	}
	if spec.WorkDir != "" {
		args = append(args, "-workdir", spec.WorkDir)
	}
	for _, e := range spec.Env {
		args = append(args, "-env", e)
	}
	args = append(args, "--")
	args = append(args, spec.Command...)
	cmd := sys.Command(j.cfg.Shim, args...)
	if j.cfg.Spawner != nil {
		code, err := j.cfg.Spawner.Spawn(ctx, cmd, spec.Stdin, spec.Stdout, spec.Stderr)
		if err != nil {
			return -1, fmt.Errorf("exec in %s: %w", id, err)
		}
		return code, nil
	}
	if spec.Stdin != nil {
		in, err := io.ReadAll(spec.Stdin)
		if err != nil {
			return -1, fmt.Errorf("exec in %s: stdin: %w", id, err)
		}
		cmd.Stdin = in
	}
	res, err := j.cfg.Runner.Run(ctx, cmd)
	if spec.Stdout != nil {
		spec.Stdout.Write(res.Stdout)
	}
	if spec.Stderr != nil {
		spec.Stderr.Write(res.Stderr)
	}
	var ee *sys.ExitError
	if errors.As(err, &ee) {
		if ee.Code == ShimExitPermanent {
			return -1, fmt.Errorf("exec in %s: %w: %s", id, ErrPermanent, strings.TrimSpace(ee.Stderr))
		}
		return ee.Code, nil
	}
	if err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	return 0, nil
}

// Logs implements Runtime.
func (j *Jails) Logs(ctx context.Context, id string, opts LogOptions) (io.ReadCloser, error) {
	if _, err := j.records.Get(id); err != nil {
		return nil, err
	}
	f := &LogFollower{Path: filepath.Join(j.records.Path(id), LogFileName)}
	render := func() ([]byte, error) {
		recs, err := f.Next()
		var buf bytes.Buffer
		for _, r := range recs {
			if opts.Since.IsZero() || !r.Time.Before(opts.Since) {
				buf.WriteString(FormatRecord(r))
			}
		}
		return buf.Bytes(), err
	}
	first, err := render()
	if err != nil {
		return nil, err
	}
	if !opts.Follow {
		return io.NopCloser(bytes.NewReader(first)), nil
	}
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer pw.Close()
		next := first
		for {
			if len(next) > 0 {
				if _, err := pw.Write(next); err != nil {
					return
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-j.clock.After(pollEvery):
			}
			if next, err = render(); err != nil {
				pw.CloseWithError(err)
				return
			}
		}
	}()
	return &stoppingReader{PipeReader: pr, stop: stop}, nil
}

type stoppingReader struct {
	*io.PipeReader
	stop chan struct{}
	once sync.Once
}

func (r *stoppingReader) Close() error {
	r.once.Do(func() { close(r.stop) })
	return r.PipeReader.Close()
}

// Usage implements Runtime: rctl's accounting of the container's jail,
// with memory from the per-page count when there is one.
func (j *Jails) Usage(ctx context.Context, id string) (Usage, error) {
	rec, err := j.records.Get(id)
	if err != nil {
		return Usage{}, err
	}
	u, err := RctlUsage(ctx, j.cfg.Runner, rec.Jail)
	if err != nil {
		return Usage{}, err
	}
	if j.cfg.Memory != nil && !rec.Spec.Infra {
		if n, err := j.cfg.Memory.JailMemory(ctx, rec.Jail); err == nil {
			u.MemoryBytes = n
		}
	}
	return u, nil
}

// Adopt takes over the containers an earlier agent left running: each
// running jail's parameters are read back and, where they are looser than
// its profile, tightened in place (jail -m), and each container's limits
// are added again.
func (j *Jails) Adopt(ctx context.Context) error {
	all, err := j.List(ctx, nil)
	if err != nil {
		return err
	}
	// Pods first: a child may have only what its parent has.
	slices.SortStableFunc(all, func(a, b ContainerStatus) int {
		if a.Infra == b.Infra {
			return 0
		}
		if a.Infra {
			return -1
		}
		return 1
	})
	var errs []error
	for _, st := range all {
		if st.State != StateRunning {
			continue
		}
		rec, err := j.records.Get(st.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		want := rec.Params
		if rec.Spec.Infra {
			want = append([]Param{{"vnet", "new"}}, rec.Params...)
		}
		if err := j.readBack(ctx, rec.Jail, want); err != nil {
			if !errors.Is(err, ErrProfileMismatch) {
				errs = append(errs, err)
				continue
			}
			j.log.Warn("adopted jail looser than its profile; tightening", "jail", rec.Jail, "err", err)
			args := append([]string{"-m", "name=" + rec.Jail}, paramArgs(rec.Params)...)
			if _, err := j.run(ctx, "jail", args...); err != nil {
				errs = append(errs, fmt.Errorf("tighten jail %s: %w", rec.Jail, err))
				continue
			}
			if err := j.readBack(ctx, rec.Jail, want); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if rec.Spec.Infra {
			j.mu.Lock()
			j.vnetOK[rec.Jail] = true
			j.mu.Unlock()
			continue
		}
		if err := AddRctl(ctx, j.cfg.Runner, rec.Jail, rec.Spec.Resources); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ProcessAlive reports whether a process exists (kill with signal 0).
func ProcessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Limited lists the running containers with a memory limit, for the
// OOMKiller's once-a-second pass.
func (j *Jails) Limited(ctx context.Context) []Limited {
	all, err := j.List(ctx, nil)
	if err != nil {
		j.log.Warn("memory limits: list", "err", err)
		return nil
	}
	var out []Limited
	for _, st := range all {
		if st.State != StateRunning || st.Infra {
			continue
		}
		rec, err := j.records.Get(st.ID)
		if err != nil || rec.Spec.Resources.MemoryBytes <= 0 {
			continue
		}
		out = append(out, Limited{Jail: rec.Jail, Limit: rec.Spec.Resources.MemoryBytes})
	}
	return out
}

// ErrAmbiguous is returned by Find when a prefix names several containers.
var ErrAmbiguous = errors.New("more than one container matches")

// Find looks a container up by its id or a prefix of it only one has, for
// a local tool.
func (j *Jails) Find(ctx context.Context, ref string) (ContainerStatus, error) {
	if st, err := j.Inspect(ctx, ref); err == nil || !errors.Is(err, ErrNotFound) {
		return st, err
	}
	ids, err := j.records.IDs()
	if err != nil {
		return ContainerStatus{}, err
	}
	var match []string
	for _, id := range ids {
		if ref != "" && strings.HasPrefix(id, ref) {
			match = append(match, id)
		}
	}
	switch len(match) {
	case 0:
		return ContainerStatus{}, fmt.Errorf("container %q: %w", ref, ErrNotFound)
	case 1:
		return j.Inspect(ctx, match[0])
	}
	slices.Sort(match)
	return ContainerStatus{}, fmt.Errorf("container %q: %w: %s", ref, ErrAmbiguous, strings.Join(match, ", "))
}

// Spawner runs a command with its standard streams attached and returns
// its exit code; err is for a command that could not run at all.
type Spawner interface {
	Spawn(ctx context.Context, c sys.Cmd, stdin io.Reader, stdout, stderr io.Writer) (int, error)
}

// ExecSpawner is the Spawner of the host (os/exec).
type ExecSpawner struct{}

// Spawn implements Spawner.
func (ExecSpawner) Spawn(ctx context.Context, c sys.Cmd, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return -1, err
	}
	return 0, nil
}
