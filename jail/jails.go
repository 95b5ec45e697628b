package jail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legionbsd/legion/sys"
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
	// Shim is the legion binary, run as `Shim jail-shim supervise|exec ...`.
	Shim string
	// Launch starts a container's supervisor, `shim jail-shim supervise
	// dir`, and says whether its process runs: code 0, or
	// ShimExitPermanent or ShimExitFailed with the reason. The supervisor
	// is to inherit lock, the run's start lock, and hold it while it
	// lives. The default, when nil, is ShimFront.Start: the supervisor is
	// this process's child until it ends.
	Launch      func(shim, dir string, lock *os.File) (code int, reason string)
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
	*Keeper // records, statuses, events, stop and remove, logs
	cfg     Config
	records Records
	clock   Clock
	log     *slog.Logger

	mu     sync.Mutex
	boot   int64
	vnetOK map[string]bool // infra jails whose VNET was checked
	podMu  sync.Mutex      // serialises changes of pod jails' parameters
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
		clock: cfg.Clock, log: cfg.Log, vnetOK: map[string]bool{}}
	if j.clock == nil {
		j.clock = RealClock{}
	}
	if j.log == nil {
		j.log = slog.New(slog.DiscardHandler)
	}
	if j.cfg.Alive == nil {
		j.cfg.Alive = ProcessAlive
	}
	if j.cfg.Launch == nil {
		j.cfg.Launch = ShimFront{Command: ShimCommand}.Start
	}
	j.Keeper = NewKeeper(j.records, j.clock, j.log, j.cfg.Alive, jailsDriver{j},
		KeeperTiming{Poll: pollEvery, Watch: eventPoll, ShimMargin: ShimMargin})
	return j, nil
}

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
	// -R, not -r: -r reads /etc/jail.conf for the jail's stop commands
	// and parameters, and Legion's jails are not there (an operator's
	// jail.conf might even name one alike); -R just removes it.
	_, err := j.run(ctx, "jail", "-R", name)
	if err != nil && !sys.IsExit(err, "not found") {
		return fmt.Errorf("remove jail %s: %w", name, err)
	}
	return nil
}

// ProcessAlive reports whether a process exists (kill with signal 0).
func ProcessAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// jailsDriver is what the Keeper asks of the jail runtime.
type jailsDriver struct{ *Jails }

// Boot is kern.boottime.
func (d jailsDriver) Boot(ctx context.Context) (int64, error) { return d.bootTime(ctx) }
