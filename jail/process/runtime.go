package process

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// pollEvery paces waits for a run's end and the reads of followed
	// logs; watchEvery the scans for ended runs, which read every record:
	// every half second, as the jail runtime's, since at five a second
	// the scans were more than half of an idle node's CPU with 250 pods
	// (a container's exit is seen up to half a second later; a restart
	// waits a second at least anyway).
	pollEvery  = 50 * time.Millisecond
	watchEvery = 500 * time.Millisecond
	// killWait is how long a killed run's supervisor has to write its
	// exit record before the runtime writes one.
	killWait = time.Second
)

// Config sets up the process runtime.
type Config struct {
	// DataDir holds the containers, in DataDir/containers/<id>.
	DataDir string
	// Shim is the legion binary, run as `Shim process-shim supervise DIR`.
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
	*jail.Keeper // records, statuses, events, stop and remove, logs
	cfg          Config
	records      jail.Records
	clock        jail.Clock
	log          *slog.Logger
	boot         int64
	sessions     sessionTable // Usage's reads of /proc
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
		clock: cfg.Clock, log: cfg.Log, boot: boot}
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
	r.Keeper = jail.NewKeeper(r.records, r.clock, r.log, r.cfg.Alive, driver{r},
		jail.KeeperTiming{Poll: pollEvery, Watch: watchEvery, ShimMargin: r.cfg.ShimMargin})
	r.log.Warn("process runtime: containers are plain host processes; nothing is isolated (network, processes, users, resources)",
		"dataDir", cfg.DataDir, "chroot", os.Geteuid() == 0)
	return r, nil
}

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
	if err := checkNetNS(spec); err != nil {
		return err
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
	r.Emit(jail.EventCreated, spec, 0)
	return nil
}

// Start implements jail.Runtime: it starts the supervisor (`process-shim
// supervise`) in a session of its own and returns once the process runs
// or could not start.
func (r *Runtime) Start(ctx context.Context, id string) error {
	defer r.StartLock(id)()
	rec, ok, err := r.Startable(ctx, id)
	if !ok || err != nil {
		return err
	}
	if rec.MountBoot != r.boot { // made in another boot: gone with it
		if err := r.mount(&rec); err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
	}
	dir := r.records.Path(id)
	lock, err := r.NewRun(ctx, id, r.boot)
	if err != nil {
		return err
	}
	defer lock.Close() // after the run has its exit record or its supervisor
	defer r.Launching(ctx, rec)()
	// Start bounds its own wait by jail.ShimStartTimeout and ignores ctx:
	// a supervisor whose start is not recorded would be one no Stop or
	// Remove finds.
	exit, reason := front.Start(r.cfg.Shim, dir, lock)
	if exit != 0 {
		code := 255
		if exit == jail.ShimExitPermanent {
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
	r.Emit(jail.EventStarted, rec.Spec, 0)
	return nil
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

// driver is what the Keeper asks of the process runtime.
type driver struct{ *Runtime }

// Boot is the boot the runtime was made in.
func (d driver) Boot(context.Context) (int64, error) { return d.boot, nil }

// AskStop signals the supervisor, which reads the stop request, sends the
// stop signal, waits the grace period and kills the process group.
func (driver) AskStop(_ context.Context, shimPid int) error {
	return syscall.Kill(shimPid, syscall.SIGTERM)
}

// Kill ends the container's process group and its supervisor, and writes
// the exit record if the supervisor does not.
func (d driver) Kill(ctx context.Context, rec jail.Record, run jail.RunInfo) error {
	if run.Pid > 0 {
		syscall.Kill(-run.Pid, syscall.SIGKILL)
	}
	if run.ShimPid > 0 {
		syscall.Kill(run.ShimPid, syscall.SIGKILL)
	}
	return d.Killed(ctx, rec.Spec.ID, killWait, "killed; the supervisor wrote no exit status")
}

// Settle kills the process group of a run whose supervisor died without
// an exit record (killed, say): the process may live on with no one to
// stop it. Only a run of this boot: its pid is not someone else's.
func (d driver) Settle(ctx context.Context, rec jail.Record) error {
	id := rec.Spec.ID
	run, hasRun, err := d.records.Run(id)
	if err != nil || !hasRun {
		return err
	}
	if _, hasExit, err := d.records.Exit(id); err != nil || hasExit {
		return err
	}
	if run.Boot != d.boot || run.Pid <= 0 || !d.cfg.Alive(run.Pid) {
		return nil
	}
	d.log.Warn("process runtime: killing a container process its supervisor left", "container", id, "pid", run.Pid)
	syscall.Kill(-run.Pid, syscall.SIGKILL)
	return d.Killed(ctx, id, 0, "supervisor gone without an exit status; its process group was killed")
}

// Release unmounts what Create or Start mounted in a container's root.
func (d driver) Release(_ context.Context, rec jail.Record) error {
	if rec.Spec.Infra || !mountable(rec, os.Geteuid()) || !mountsSupported {
		return nil
	}
	return unmountAll(rec)
}

func hasEnv(env []string, key string) bool {
	return slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, key+"=") })
}
