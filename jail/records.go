package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// Files of a container's directory, <data-dir>/jails/<id>.
const (
	RecordFile  = "record.json" // Record, written at create
	RunFile     = "run"         // RunInfo, written at each start
	ExitFile    = "exit"        // ExitInfo, written when the run ends
	LogFileName = "log"         // output records, rotated to log.1
	StopFile    = "stop"        // StopRequest, written before the supervisor is asked to stop
	ShimLogFile = "shim.log"    // the supervisor's own complaints
	// StartLockFile is locked (flock) by a start from NewRun on, and by
	// the supervisor it launches, which inherits the lock, for as long as
	// it lives: a run that no supervisor recorded itself in is still
	// starting only while someone holds it.
	StartLockFile = "start.lock"
)

// Record is what a container is, kept so a restarted agent finds it again.
type Record struct {
	Spec      ContainerSpec `json:"spec"`
	Jail      string        `json:"jail"` // the jail's name: <infra>.<id> in a pod
	CreatedAt time.Time     `json:"createdAt"`
	// MountBoot is the boot (kern.boottime, Unix seconds) the mounts were
	// made in; a reboot drops them, so the next start makes them again.
	MountBoot int64 `json:"mountBoot,omitempty"`
	// Params are the security parameters the jail was made with.
	Params []Param `json:"params,omitempty"`
}

// RunInfo is one run of a container.
type RunInfo struct {
	Boot      int64     `json:"boot"` // kern.boottime of the run
	StartedAt time.Time `json:"startedAt"`
	ShimPid   int       `json:"shimPid,omitempty"`
	Pid       int       `json:"pid,omitempty"`
}

// ExitInfo is how a run ended.
type ExitInfo struct {
	Code       int       `json:"code"`
	Signal     string    `json:"signal,omitempty"`
	FinishedAt time.Time `json:"finishedAt"`
	Message    string    `json:"message,omitempty"`
}

// StopRequest tells the supervisor how long the process may take to end.
type StopRequest struct {
	Grace time.Duration `json:"grace"`
}

// WriteJSON writes v to path atomically (a temporary file renamed).
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// ReadJSON reads path into v; a missing file is reported with
// os.ErrNotExist.
func ReadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// Records keeps containers' directories under <data-dir>/jails.
type Records struct {
	Dir string // <data-dir>/jails
}

// Path is the directory of container id.
func (r Records) Path(id string) string { return filepath.Join(r.Dir, id) }

// Create makes a new container's directory and record; ErrExists if it
// has one.
func (r Records) Create(rec Record) error {
	dir := r.Path(rec.Spec.ID)
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return fmt.Errorf("records: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create %s: %w", rec.Spec.ID, ErrExists)
		}
		return fmt.Errorf("records: %w", err)
	}
	return WriteJSON(filepath.Join(dir, RecordFile), rec)
}

// Get reads a container's record; ErrNotFound if there is none.
func (r Records) Get(id string) (Record, error) {
	var rec Record
	err := ReadJSON(filepath.Join(r.Path(id), RecordFile), &rec)
	if errors.Is(err, os.ErrNotExist) {
		return rec, fmt.Errorf("container %s: %w", id, ErrNotFound)
	}
	return rec, err
}

// Gone reports whether a container's record is no more (removed), by a
// stat: what a log follower asks at every poll.
func (r Records) Gone(id string) bool {
	_, err := os.Stat(filepath.Join(r.Path(id), RecordFile))
	return errors.Is(err, os.ErrNotExist)
}

// Put rewrites a record.
func (r Records) Put(rec Record) error {
	return WriteJSON(filepath.Join(r.Path(rec.Spec.ID), RecordFile), rec)
}

// IDs lists the containers that have a record.
func (r Records) IDs() ([]string, error) {
	entries, err := os.ReadDir(r.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join(r.Dir, e.Name(), RecordFile)); err == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// errStartHeld: another start, or the supervisor of the last run, holds
// the start lock.
var errStartHeld = errors.New("its start lock is held")

// LockStart takes the start lock of container id, for a start about to
// begin; it is held until the file is closed and by every process that
// inherits it. It does not wait: held by another start or by the last
// run's supervisor (still ending), it fails with errStartHeld.
func (r Records) LockStart(id string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(r.Path(id), StartLockFile), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", id, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errStartHeld
		}
		return nil, fmt.Errorf("start %s: locking %s: %w", id, StartLockFile, err)
	}
	return f, nil
}

// StartHeld reports whether a start of container id or the supervisor it
// launched holds the start lock. A directory without the lock file (runs
// recorded before there was one) counts as held: nothing can say the
// start ended.
func (r Records) StartHeld(id string) bool {
	f, err := os.Open(filepath.Join(r.Path(id), StartLockFile))
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}

// Run and Exit read a container's last run and how it ended; ok is false
// when there is none.
func (r Records) Run(id string) (RunInfo, bool, error) {
	var ri RunInfo
	err := ReadJSON(filepath.Join(r.Path(id), RunFile), &ri)
	if errors.Is(err, os.ErrNotExist) {
		return ri, false, nil
	}
	return ri, err == nil, err
}

func (r Records) Exit(id string) (ExitInfo, bool, error) {
	var ei ExitInfo
	err := ReadJSON(filepath.Join(r.Path(id), ExitFile), &ei)
	if errors.Is(err, os.ErrNotExist) {
		return ei, false, nil
	}
	return ei, err == nil, err
}

// Remove deletes a container's directory.
func (r Records) Remove(id string) error {
	if err := os.RemoveAll(r.Path(id)); err != nil {
		return fmt.Errorf("remove record of %s: %w", id, err)
	}
	return nil
}

// Status derives a container's state from its files. A run without an
// exit is running while its boot is the current one and it lived when
// asked (live, asked before the exit record was read: see Keeper.Status):
// its supervisor, or, before one recorded itself, its start. A run from
// before a reboot counts as over.
func Status(rec Record, run RunInfo, hasRun bool, exit ExitInfo, hasExit bool, boot int64, live bool) ContainerStatus {
	st := ContainerStatus{
		ID: rec.Spec.ID, Pod: rec.Spec.Pod, Infra: rec.Spec.Infra,
		Labels: rec.Spec.Labels, Annotations: rec.Spec.Annotations,
		State: StateCreated, CreatedAt: rec.CreatedAt,
	}
	if rec.Spec.Infra {
		st.State = StateRunning
		st.StartedAt = rec.CreatedAt
		if rec.MountBoot != 0 && rec.MountBoot != boot {
			st.State, st.Message = StateExited, "ended by a reboot"
		}
		return st
	}
	if hasExit {
		st.Message = exit.Message
	}
	if !hasRun {
		return st
	}
	st.StartedAt = run.StartedAt
	switch {
	case hasExit:
		st.State, st.ExitCode, st.Signal, st.FinishedAt = StateExited, exit.Code, exit.Signal, exit.FinishedAt
	case run.Boot != boot:
		st.State, st.ExitCode, st.Message = StateExited, 255, "ended by a reboot"
	case !live && run.ShimPid == 0:
		// The process starting it ended (killed, say) before a supervisor
		// took it: nothing runs. Its end is its start, so each such run
		// has a died event of its own.
		st.State, st.ExitCode, st.FinishedAt = StateExited, 255, run.StartedAt
		st.Message = "its start was cut short: the process starting it ended before a supervisor took it"
	case !live:
		st.State, st.ExitCode, st.Message = StateExited, 255, "supervisor gone without an exit status"
	default:
		st.State, st.Pid = StateRunning, run.Pid
	}
	return st
}
