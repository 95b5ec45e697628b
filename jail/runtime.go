package jail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
)

// Runtime runs containers. Containers are named by the caller's ids; a pod
// is an infra container (Infra set, no process) whose id its members give
// as Pod. Implementations must pass jailtest.RunConformance.
type Runtime interface {
	// Create records a container and prepares it to start. It fails with
	// ErrExists when the id is taken and ErrNotFound when Pod names no
	// infra container. An infra container is running once created.
	Create(ctx context.Context, spec ContainerSpec) error
	// Start runs a created or exited container's command again. A command
	// that cannot run fails the start with the reason (errors.Is
	// ErrPermanent when waiting cannot fix it).
	Start(ctx context.Context, id string) error
	// Stop sends the stop signal, waits up to the grace period (the spec's
	// when grace is negative) for the process to end, then kills it.
	// Stopping a container that is not running succeeds.
	Stop(ctx context.Context, id string, grace time.Duration) error
	// Remove stops the container at once and forgets it; removing an infra
	// container removes its members too. Removing an unknown id succeeds.
	Remove(ctx context.Context, id string) error
	Inspect(ctx context.Context, id string) (ContainerStatus, error)
	// List returns the containers whose labels hold every pair of selector.
	List(ctx context.Context, selector map[string]string) ([]ContainerStatus, error)
	// Events streams what happens from now on until ctx ends; the channel
	// is closed then.
	Events(ctx context.Context) (<-chan Event, error)
	// Exec runs a command in a running container and returns its exit code.
	Exec(ctx context.Context, id string, spec ExecSpec) (int, error)
	// Logs returns the container's output as log records (FormatRecord),
	// following new output until ctx ends or the container is removed
	// when follow is set. A container removed before any of its output
	// could be read is ErrNotFound, from Logs or as the follow's error.
	Logs(ctx context.Context, id string, opts LogOptions) (io.ReadCloser, error)
	Usage(ctx context.Context, id string) (Usage, error)
}

// Errors callers branch on.
var (
	ErrNotFound   = errors.New("no such container")
	ErrExists     = errors.New("container already exists")
	ErrNotRunning = errors.New("container is not running")
	// ErrPermanent marks a start failure that retrying cannot fix: no such
	// command, an exec format error, a wrong platform.
	ErrPermanent = errors.New("permanent failure")
)

// PermanentReason is why a failure marked ErrPermanent cannot be fixed by
// trying again: its text after the mark, without the call and container
// id before it, for a user who knows which container they asked for.
func PermanentReason(err error) string {
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, ErrPermanent.Error()+": "); ok {
		return after
	}
	return msg
}

// Mount kinds.
const (
	MountNullfs = "nullfs"
	MountTmpfs  = "tmpfs"
	MountDevfs  = "devfs"
)

// Mount is a file system made visible in a container at Target.
type Mount struct {
	Source   string `json:"source,omitempty"` // host path (nullfs); ignored for tmpfs and devfs
	Target   string `json:"target"`           // absolute path inside the container
	ReadOnly bool   `json:"readOnly,omitempty"`
	Kind     string `json:"kind"` // MountNullfs, MountTmpfs or MountDevfs
}

// Resources are a container's limits; zero means unlimited.
type Resources struct {
	CPUMillis   int64 `json:"cpuMillis,omitempty"` // 1000 is one CPU
	MemoryBytes int64 `json:"memoryBytes,omitempty"`
	MaxProc     int64 `json:"maxProc,omitempty"`
	OpenFiles   int64 `json:"openFiles,omitempty"`
}

// Limited reports whether any limit is set.
func (r Resources) Limited() bool {
	return r.CPUMillis > 0 || r.MemoryBytes > 0 || r.MaxProc > 0 || r.OpenFiles > 0
}

// What a container's security may allow.
const (
	AllowRawSockets = "rawSockets"
	AllowChflags    = "chflags"
	AllowMlock      = "mlock"
	AllowSysvipc    = "sysvipc"
)

// Security loosens the jail defaults (no raw sockets, chflags, mlock or
// SysV IPC, securelevel 2, enforce_statfs 2). Nil levels keep the default.
type Security struct {
	Allow         []string `json:"allow,omitempty"`
	Securelevel   *int     `json:"securelevel,omitempty"`   // -1 to 3
	EnforceStatfs *int     `json:"enforceStatfs,omitempty"` // 1 or 2
}

// Root is where a container's file system is, prepared by the image store:
// a directory and, on ZFS, the dataset mounted there.
type Root struct {
	Path    string `json:"path"`
	Dataset string `json:"dataset,omitempty"`
}

// ContainerSpec is everything a runtime needs to make a container.
type ContainerSpec struct {
	ID string `json:"id"`
	// Infra makes this the pod's infra container: a network and the
	// parent of the pod's members, with no process of its own.
	Infra bool `json:"infra,omitempty"`
	// Pod is the id of the infra container this container joins; empty
	// for an infra container or a standalone member.
	Pod         string            `json:"pod,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Image       string            `json:"image,omitempty"` // for display only
	// Command is the full argv (entrypoint then cmd).
	Command []string `json:"command,omitempty"`
	// ImageEnv is the image's environment; Env (KEY=VALUE) overrides it.
	ImageEnv []string `json:"imageEnv,omitempty"`
	Env      []string `json:"env,omitempty"`
	// EnvFile names a file holding more KEY=VALUE entries (a JSON list),
	// read each time the process starts and over Env: values that must
	// stay out of the container's record on disk (secrets), kept by the
	// caller in memory-backed storage.
	EnvFile string `json:"envFile,omitempty"`
	// User is user[:group], by name or number, looked up in the image.
	User      string    `json:"user,omitempty"`
	WorkDir   string    `json:"workDir,omitempty"`
	Root      Root      `json:"root"`
	Mounts    []Mount   `json:"mounts,omitempty"`
	Resources Resources `json:"resources,omitempty"`
	Security  Security  `json:"security,omitempty"`
	// StopSignal defaults to SIGTERM, StopGrace to 10 s.
	StopSignal syscall.Signal `json:"stopSignal,omitempty"`
	StopGrace  time.Duration  `json:"stopGrace,omitempty"`
	// Linux runs the container through the Linux ABI.
	Linux bool `json:"linux,omitempty"`
	// NetNS is the path of a Linux network namespace (a /run/netns file)
	// the container's processes, execs included, run in: the process
	// runtime's pod network. Jails have VNET instead and refuse it.
	NetNS string `json:"netns,omitempty"`
}

// DefaultStopGrace is the grace period when a spec gives none.
const DefaultStopGrace = 10 * time.Second

// Signal returns the stop signal, SIGTERM when unset.
func (s ContainerSpec) Signal() syscall.Signal {
	if s.StopSignal == 0 {
		return syscall.SIGTERM
	}
	return s.StopSignal
}

// Grace returns the stop grace period, DefaultStopGrace when unset.
func (s ContainerSpec) Grace() time.Duration {
	if s.StopGrace <= 0 {
		return DefaultStopGrace
	}
	return s.StopGrace
}

// Validate checks what every runtime relies on.
func (s ContainerSpec) Validate() error {
	if s.ID == "" {
		return errors.New("container spec: id: missing")
	}
	for _, c := range s.ID {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return errors.New("container spec: id " + s.ID + ": only letters, digits, '-' and '_' are allowed")
		}
	}
	if s.Infra && s.Pod != "" {
		return errors.New("container spec " + s.ID + ": an infra container joins no pod")
	}
	if !s.Infra && len(s.Command) == 0 {
		return errors.New("container spec " + s.ID + ": command: missing")
	}
	for i, m := range s.Mounts {
		switch m.Kind {
		case MountNullfs, MountTmpfs, MountDevfs:
		default:
			return fmt.Errorf("container spec %s: mounts[%d].kind %q: expected nullfs, tmpfs or devfs", s.ID, i, m.Kind)
		}
		if len(m.Target) == 0 || m.Target[0] != '/' {
			return fmt.Errorf("container spec %s: mounts[%d].target %q: expected an absolute path", s.ID, i, m.Target)
		}
	}
	return nil
}

// State is where a container is in its life.
type State string

const (
	StateCreated State = "created"
	StateRunning State = "running"
	StateExited  State = "exited"
)

// ContainerStatus is what Inspect and List report.
type ContainerStatus struct {
	ID          string            `json:"id"`
	Pod         string            `json:"pod,omitempty"`
	Infra       bool              `json:"infra,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	State       State             `json:"state"`
	Pid         int               `json:"pid,omitempty"`
	ExitCode    int               `json:"exitCode"`
	// Signal is the signal that ended the process, if one did.
	Signal     string    `json:"signal,omitempty"`
	CreatedAt  time.Time `json:"createdAt"`
	StartedAt  time.Time `json:"startedAt,omitzero"`
	FinishedAt time.Time `json:"finishedAt,omitzero"`
	// Message says why a start failed or a run ended unusually.
	Message string `json:"message,omitempty"`
}

// Event kinds.
const (
	EventCreated = "created"
	EventStarted = "started"
	EventDied    = "died"
	EventRemoved = "removed"
)

// Event is one change of a container.
type Event struct {
	Type     string            `json:"type"`
	ID       string            `json:"id"`
	Labels   map[string]string `json:"labels,omitempty"`
	ExitCode int               `json:"exitCode"`
	Time     time.Time         `json:"time"`
}

// Usage is what a container uses now.
type Usage struct {
	CPUTime     time.Duration `json:"cpuTime"`
	MemoryBytes int64         `json:"memoryBytes"`
	Processes   int64         `json:"processes"`
	OpenFiles   int64         `json:"openFiles"`
}

// ExecSpec is a command run in a running container.
type ExecSpec struct {
	Command []string
	Env     []string
	User    string
	WorkDir string
	TTY     bool
	// Size is the terminal's size at the start (nil: the runtime's
	// default); Resize brings its later sizes until it is closed or the
	// command ends. Both need TTY.
	Size   *TermSize
	Resize <-chan TermSize
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

// TermSize is a terminal's size in characters.
type TermSize struct {
	Rows, Cols uint16
}

func (s TermSize) String() string { return fmt.Sprintf("%dx%d", s.Rows, s.Cols) }

// CheckTerminal refuses a terminal size, or its changes, for a command
// that is not run on a terminal: nothing would apply them.
func (s ExecSpec) CheckTerminal() error {
	switch {
	case s.TTY:
		return nil
	case s.Size != nil:
		return errors.New("exec: size: a terminal size needs tty")
	case s.Resize != nil:
		return errors.New("exec: resize: terminal resizes need tty")
	}
	return nil
}

// LogOptions selects output from Logs.
type LogOptions struct {
	Follow bool
	Since  time.Time // records at or after this time; zero for all
}

// MatchLabels reports whether labels hold every pair of selector.
func MatchLabels(labels, selector map[string]string) bool {
	for k, v := range selector {
		got, ok := labels[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}
