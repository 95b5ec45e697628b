package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legionbsd/legion/jail"
)

// AnnotationPodAddress is where the loopback network's pod address (in
// 127.0.0.0/8) is recorded on an infra container, when the agent gives one.
const AnnotationPodAddress = "legion.pod.address"

// Timing of the runtime's waits.
const (
	// DefaultShimMargin is how long past the grace period Stop waits for
	// the supervisor's exit record before killing the process group itself.
	DefaultShimMargin = 5 * time.Second
	// pollEvery paces waits for a run's end; watchEvery the scans for
	// events and followed logs, which read every record.
	pollEvery  = 50 * time.Millisecond
	watchEvery = 200 * time.Millisecond
)

// Config sets up the process runtime.
type Config struct {
	// DataDir holds the containers, in DataDir/containers/<id>.
	DataDir string
	// Shim is the legion binary, run as `Shim process-shim start DIR`.
	Shim  string
	Clock jail.Clock         // jail.RealClock when nil
	Alive func(pid int) bool // whether a process lives (zombies do not); processAlive when nil
	Log   *slog.Logger       // discarded when nil
	// ShimMargin is DefaultShimMargin when zero.
	ShimMargin time.Duration
}

// Runtime runs containers as supervised host processes. It isolates
// nothing.
type Runtime struct {
	cfg     Config
	records jail.Records
	clock   jail.Clock
	log     *slog.Logger
	boot    int64

	mu sync.Mutex
	// subs are the Events subscribers; watching is set once one came.
	subs     []chan jail.Event
	watching bool
	// reported is the finish time of the last died event per container;
	// starting holds containers whose died event waits for their started.
	reported map[string]time.Time
	starting map[string]bool
	// startLocks keep two starts of one container from both running it.
	startLocks map[string]*sync.Mutex
	wg         sync.WaitGroup
}

var _ jail.Runtime = (*Runtime)(nil)

// New returns the runtime over cfg.DataDir, where it finds the containers
// an earlier runtime left (running ones keep running under their
// supervisors). It logs that it isolates nothing.
func New(cfg Config) (*Runtime, error) {
	if cfg.DataDir == "" || cfg.Shim == "" {
		return nil, errors.New("process runtime: DataDir and Shim are required")
	}
	boot, err := bootID()
	if err != nil {
		return nil, fmt.Errorf("process runtime: %w", err)
	}
	r := &Runtime{cfg: cfg, records: jail.Records{Dir: filepath.Join(cfg.DataDir, "containers")},
		clock: cfg.Clock, log: cfg.Log, boot: boot,
		reported: map[string]time.Time{}, starting: map[string]bool{}, startLocks: map[string]*sync.Mutex{}}
	if r.clock == nil {
		r.clock = jail.RealClock{}
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.cfg.Alive == nil {
		r.cfg.Alive = processAlive
	}
	if r.cfg.ShimMargin <= 0 {
		r.cfg.ShimMargin = DefaultShimMargin
	}
	r.log.Warn("process runtime: containers are plain host processes; nothing is isolated (network, processes, users, resources)",
		"dataDir", cfg.DataDir, "chroot", os.Geteuid() == 0)
	return r, nil
}

// Wait waits for the goroutines of Events and Logs callers whose contexts
// have ended.
func (r *Runtime) Wait() { r.wg.Wait() }

// Dir is the directory of container id.
func (r *Runtime) Dir(id string) string { return r.records.Path(id) }

// Create implements jail.Runtime.
func (r *Runtime) Create(ctx context.Context, spec jail.ContainerSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	if !spec.Infra && spec.Root.Path == "" {
		return fmt.Errorf("container spec %s: root.path: missing (the image's unpacked root)", spec.ID)
	}
	if spec.Pod != "" {
		infra, err := r.records.Get(spec.Pod)
		if err != nil || !infra.Spec.Infra {
			return fmt.Errorf("create %s: pod %s: %w", spec.ID, spec.Pod, jail.ErrNotFound)
		}
	}
	if !spec.Infra && !hasEnv(spec.ImageEnv, "HOSTNAME") && !hasEnv(spec.Env, "HOSTNAME") {
		// No hostname of its own: say in HOSTNAME which container this
		// is, as a jail's host.hostname does (the spec's Env may override).
		spec.ImageEnv = append(slices.Clone(spec.ImageEnv), "HOSTNAME="+spec.ID)
	}
	rec := jail.Record{Spec: spec, Jail: spec.ID, CreatedAt: r.clock.Now()}
	if spec.Infra {
		// The pod is "up" for this boot only: after a reboot it counts as
		// over, as a pod jail would be gone.
		rec.MountBoot = r.boot
	}
	if err := r.records.Create(rec); err != nil {
		return err
	}
	if err := r.mount(&rec); err != nil {
		r.records.Remove(spec.ID)
		return err
	}
	r.emit(jail.EventCreated, spec, 0)
	return nil
}

func (r *Runtime) status(rec jail.Record) (jail.ContainerStatus, error) {
	run, hasRun, err := r.records.Run(rec.Spec.ID)
	if err != nil {
		return jail.ContainerStatus{}, err
	}
	exit, hasExit, err := r.records.Exit(rec.Spec.ID)
	if err != nil {
		return jail.ContainerStatus{}, err
	}
	return jail.Status(rec, run, hasRun, exit, hasExit, r.boot, r.cfg.Alive), nil
}

// Start implements jail.Runtime: `process-shim start` runs the supervisor
// detached and returns once the process runs or could not start.
func (r *Runtime) Start(ctx context.Context, id string) error {
	r.mu.Lock()
	l, ok := r.startLocks[id]
	if !ok {
		l = &sync.Mutex{}
		r.startLocks[id] = l
	}
	r.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	rec, err := r.records.Get(id)
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		return nil
	}
	st, err := r.status(rec)
	if err != nil {
		return err
	}
	if st.State == jail.StateRunning {
		return nil
	}
	r.noteDeath(st)
	if rec.MountBoot != r.boot { // made in another boot: gone with it
		if err := r.mount(&rec); err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
	}
	dir := r.records.Path(id)
	os.Remove(filepath.Join(dir, jail.ExitFile))
	os.Remove(filepath.Join(dir, jail.StopFile))
	if err := jail.WriteJSON(filepath.Join(dir, jail.RunFile), jail.RunInfo{Boot: r.boot, StartedAt: r.clock.Now()}); err != nil {
		return err
	}
	r.mu.Lock()
	r.starting[id] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.starting, id)
		r.mu.Unlock()
		if st, err := r.status(rec); err == nil {
			r.noteDeath(st) // a run that ended already
		}
	}()
	var stderr bytes.Buffer
	// The start helper forks the supervisor, which outlives it: killing
	// the helper when ctx ends would leave a supervisor running whose
	// start was never recorded, which no Stop or Remove finds. So the
	// helper runs to its end however the caller's context ends; it bounds
	// its own wait by startTimeout, and this bound leaves it that.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*startTimeout)
	defer cancel()
	cmd := exec.CommandContext(sctx, r.cfg.Shim, ShimCommand, "start", dir)
	cmd.Stderr = &stderr
	err = cmd.Run()
	if err != nil {
		reason := strings.TrimSpace(stderr.String())
		if reason == "" {
			reason = err.Error()
		}
		var ee *exec.ExitError
		code := 255
		if errors.As(err, &ee) && ee.ExitCode() == jail.ShimExitPermanent {
			err = fmt.Errorf("start %s: %w: %s", id, jail.ErrPermanent, reason)
			code = 127
		} else {
			err = fmt.Errorf("start %s: %s", id, reason)
		}
		// The supervisor writes the exit record when it could not start
		// the process; write one when it never got that far.
		if _, ok, _ := r.records.Exit(id); !ok {
			jail.WriteJSON(filepath.Join(dir, jail.ExitFile), jail.ExitInfo{Code: code, FinishedAt: r.clock.Now(), Message: reason})
		}
		return err
	}
	r.emit(jail.EventStarted, rec.Spec, 0)
	return nil
}

// waitExit polls for a run's exit record until d has passed.
func (r *Runtime) waitExit(ctx context.Context, id string, d time.Duration) (bool, error) {
	deadline := r.clock.Now().Add(d)
	for {
		if _, ok, err := r.records.Exit(id); ok || err != nil {
			return ok, err
		}
		if !r.clock.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-r.clock.After(pollEvery):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Stop implements jail.Runtime: the supervisor sends the stop signal,
// waits the grace period and kills the process group. Should it not
// report, the runtime kills the group itself.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	rec, err := r.records.Get(id)
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		return nil
	}
	st, err := r.status(rec)
	if err != nil {
		return err
	}
	if st.State != jail.StateRunning {
		return r.endOrphan(rec)
	}
	if grace < 0 {
		grace = rec.Spec.Grace()
	}
	run, _, err := r.records.Run(id)
	if err != nil {
		return err
	}
	dir := r.records.Path(id)
	if err := jail.WriteJSON(filepath.Join(dir, jail.StopFile), jail.StopRequest{Grace: grace}); err != nil {
		return err
	}
	if run.ShimPid != 0 {
		if err := syscall.Kill(run.ShimPid, syscall.SIGTERM); err != nil {
			r.log.Warn("supervisor did not take the stop request", "container", id, "pid", run.ShimPid, "err", err)
		}
	}
	if ok, err := r.waitExit(ctx, id, grace+r.cfg.ShimMargin); ok || err != nil {
		return err
	}
	return r.kill(ctx, id, run)
}

// kill ends the container's process group and its supervisor, and writes
// the exit record if the supervisor does not.
func (r *Runtime) kill(ctx context.Context, id string, run jail.RunInfo) error {
	if run.Pid > 0 {
		syscall.Kill(-run.Pid, syscall.SIGKILL)
	}
	if run.ShimPid > 0 {
		syscall.Kill(run.ShimPid, syscall.SIGKILL)
	}
	ok, err := r.waitExit(ctx, id, time.Second)
	if ok || err != nil {
		return err
	}
	return jail.WriteJSON(filepath.Join(r.records.Path(id), jail.ExitFile), jail.ExitInfo{
		Code: 137, Signal: "KILL", FinishedAt: r.clock.Now(),
		Message: "killed; the supervisor wrote no exit status",
	})
}

// Remove implements jail.Runtime.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	rec, err := r.records.Get(id)
	if errors.Is(err, jail.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		ids, err := r.records.IDs()
		if err != nil {
			return err
		}
		for _, mid := range ids {
			if m, err := r.records.Get(mid); err == nil && m.Spec.Pod == id {
				if err := r.Remove(ctx, mid); err != nil {
					return err
				}
			}
		}
	} else {
		st, err := r.status(rec)
		if err != nil {
			return err
		}
		if st.State == jail.StateRunning {
			if err := r.Stop(ctx, id, 0); err != nil {
				return err
			}
			if st, err = r.status(rec); err != nil {
				return err
			}
		}
		if err := r.endOrphan(rec); err != nil {
			return err
		}
		r.noteDeath(st)
		if mountable(rec, os.Geteuid()) && mountsSupported {
			// Before the record goes: a root removed with mounts in it
			// would take their sources' files along.
			if err := unmountAll(rec); err != nil {
				return err
			}
		}
	}
	if err := r.records.Remove(id); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.reported, id)
	delete(r.startLocks, id)
	r.mu.Unlock()
	r.emit(jail.EventRemoved, rec.Spec, 0)
	return nil
}

// Inspect implements jail.Runtime.
func (r *Runtime) Inspect(ctx context.Context, id string) (jail.ContainerStatus, error) {
	rec, err := r.records.Get(id)
	if err != nil {
		return jail.ContainerStatus{}, err
	}
	return r.status(rec)
}

// List implements jail.Runtime.
func (r *Runtime) List(ctx context.Context, selector map[string]string) ([]jail.ContainerStatus, error) {
	ids, err := r.records.IDs()
	if err != nil {
		return nil, err
	}
	var out []jail.ContainerStatus
	for _, id := range ids {
		rec, err := r.records.Get(id)
		if errors.Is(err, jail.ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		if !jail.MatchLabels(rec.Spec.Labels, selector) {
			continue
		}
		st, err := r.status(rec)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b jail.ContainerStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// mount makes the container's mounts when this host allows them (root on
// Linux, a root of its own) and records the boot they were made in;
// elsewhere a spec's mounts are skipped with a warning.
func (r *Runtime) mount(rec *jail.Record) error {
	if rec.Spec.Infra {
		return nil
	}
	if !mountable(*rec, os.Geteuid()) || !mountsSupported {
		if len(rec.Spec.Mounts) > 0 {
			r.log.Warn("process runtime: mounts not made (they need root on Linux and a root other than /)",
				"container", rec.Spec.ID, "mounts", len(rec.Spec.Mounts))
		}
		return nil
	}
	if err := mountAll(*rec); err != nil {
		return err
	}
	rec.MountBoot = r.boot
	if err := r.records.Put(*rec); err != nil {
		unmountAll(*rec)
		return err
	}
	return nil
}

// endOrphan kills the process group of a run whose supervisor died
// without an exit record (killed, say): the process may live on with no
// one to stop it. Only a run of this boot: its pid is not someone else's.
func (r *Runtime) endOrphan(rec jail.Record) error {
	id := rec.Spec.ID
	run, hasRun, err := r.records.Run(id)
	if err != nil || !hasRun {
		return err
	}
	if _, hasExit, err := r.records.Exit(id); err != nil || hasExit {
		return err
	}
	if run.Boot != r.boot || run.Pid <= 0 || !r.cfg.Alive(run.Pid) {
		return nil
	}
	r.log.Warn("process runtime: killing a container process its supervisor left", "container", id, "pid", run.Pid)
	syscall.Kill(-run.Pid, syscall.SIGKILL)
	return jail.WriteJSON(filepath.Join(r.records.Path(id), jail.ExitFile), jail.ExitInfo{
		Code: 137, Signal: "KILL", FinishedAt: r.clock.Now(),
		Message: "supervisor gone without an exit status; its process group was killed",
	})
}

func hasEnv(env []string, key string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
}
