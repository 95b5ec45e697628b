package jail

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Keeper is the part of a runtime that works on the containers' records
// alone, shared by the jail runtime and the process runtime (which embed
// it): statuses read from the records, the events and the died events
// found by polling them, waits for a run's exit record, logs, and the
// order of a stop and of a remove. What differs between runtimes it asks
// of a Driver. Its methods beyond Runtime's are for runtimes built on it.
type Keeper struct {
	records Records
	clock   Clock
	log     *slog.Logger
	alive   func(pid int) bool
	driver  Driver
	timing  KeeperTiming

	mu sync.Mutex
	// subs are the Events subscribers; watching is set once one came.
	subs     []chan Event
	watching bool
	// reported is the finish time of the last died event per container;
	// starting holds containers whose died event waits for their started.
	reported map[string]time.Time
	starting map[string]bool
	// startLocks keep two starts of one container from both running it.
	startLocks map[string]*sync.Mutex
	wg         sync.WaitGroup
}

// KeeperTiming paces a Keeper's waits.
type KeeperTiming struct {
	// Poll paces waits for an exit record and the reads of followed logs.
	Poll time.Duration
	// Watch paces the scans for ended runs while Events has subscribers.
	Watch time.Duration
	// ShimMargin is how long past the grace period Stop waits for the
	// supervisor's exit record before the Driver kills the run.
	ShimMargin time.Duration
}

// Driver is what a runtime does its own way, for its Keeper.
type Driver interface {
	// Boot names the host's current boot: a run of another is over.
	Boot(ctx context.Context) (int64, error)
	// AskStop has the supervisor (shimPid) act on the stop request.
	AskStop(ctx context.Context, shimPid int) error
	// Kill ends a run whose supervisor did not report in time (see
	// Keeper.Killed).
	Kill(ctx context.Context, rec Record, run RunInfo) error
	// Settle deals with a container that is not running before Stop or
	// Remove report it stopped (a process its dead supervisor left).
	Settle(ctx context.Context, rec Record) error
	// Release undoes what Create made for a container (mounts, limits, a
	// pod's jail) before its record goes.
	Release(ctx context.Context, rec Record) error
}

// NewKeeper returns the Keeper of the containers in records; clock, log and
// alive are RealClock, a discarding logger and "every supervisor lives"
// when nil.
func NewKeeper(records Records, clock Clock, log *slog.Logger, alive func(pid int) bool, d Driver, timing KeeperTiming) *Keeper {
	if clock == nil {
		clock = RealClock{}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Keeper{records: records, clock: clock, log: log, alive: alive, driver: d, timing: timing,
		reported: map[string]time.Time{}, starting: map[string]bool{}, startLocks: map[string]*sync.Mutex{}}
}

// Wait waits for the goroutines of Events and Logs callers whose contexts
// have ended.
func (k *Keeper) Wait() { k.wg.Wait() }

// Emit sends an event to every subscriber.
func (k *Keeper) Emit(typ string, spec ContainerSpec, code int) {
	ev := Event{Type: typ, ID: spec.ID, Labels: spec.Labels, ExitCode: code, Time: k.clock.Now()}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, s := range k.subs {
		select {
		case s <- ev:
		default: // a subscriber that does not read loses events; the agent reconciles
		}
	}
}

// Status reads a container's state from its records.
func (k *Keeper) Status(ctx context.Context, rec Record) (ContainerStatus, error) {
	boot, err := k.driver.Boot(ctx)
	if err != nil {
		return ContainerStatus{}, err
	}
	run, hasRun, err := k.records.Run(rec.Spec.ID)
	if err != nil {
		return ContainerStatus{}, err
	}
	// A supervisor writes the exit record, then ends. Asked after the
	// record was read, one that wrote it and ended in between would be
	// "gone without an exit status" (255) though its process exited with
	// a code; asked first, one found gone has left any record it writes.
	alive := true
	switch {
	case !hasRun:
	case run.ShimPid != 0 && k.alive != nil:
		alive = k.alive(run.ShimPid)
	case run.ShimPid == 0:
		// No supervisor recorded itself yet: the run lives while its
		// start does (see NewRun).
		alive = k.records.StartHeld(rec.Spec.ID)
	}
	exit, hasExit, err := k.records.Exit(rec.Spec.ID)
	if err != nil {
		return ContainerStatus{}, err
	}
	return Status(rec, run, hasRun, exit, hasExit, boot, alive), nil
}

// Inspect implements Runtime.
func (k *Keeper) Inspect(ctx context.Context, id string) (ContainerStatus, error) {
	rec, err := k.records.Get(id)
	if err != nil {
		return ContainerStatus{}, err
	}
	return k.Status(ctx, rec)
}

// List implements Runtime.
func (k *Keeper) List(ctx context.Context, selector map[string]string) ([]ContainerStatus, error) {
	ids, err := k.records.IDs()
	if err != nil {
		return nil, err
	}
	var out []ContainerStatus
	for _, id := range ids {
		rec, err := k.records.Get(id)
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		if !MatchLabels(rec.Spec.Labels, selector) {
			continue
		}
		st, err := k.Status(ctx, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b ContainerStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Events implements Runtime. Ends of runs are found by polling the
// records (and checked before a container starts again or goes, so its
// died event comes first); a run that ended while no one subscribed is
// left to the agent's reconciliation.
func (k *Keeper) Events(ctx context.Context) (<-chan Event, error) {
	ch := make(chan Event, 1024)
	k.mu.Lock()
	first := !k.watching
	k.watching = true
	k.mu.Unlock()
	if first {
		l, err := k.List(ctx, nil)
		if err != nil {
			return nil, err
		}
		k.mu.Lock()
		for _, st := range l {
			if st.State == StateExited {
				k.reported[st.ID] = st.FinishedAt
			}
		}
		k.mu.Unlock()
	}
	k.mu.Lock()
	k.subs = append(k.subs, ch)
	k.mu.Unlock()
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer func() {
			k.mu.Lock()
			k.subs = slices.DeleteFunc(k.subs, func(s chan Event) bool { return s == ch })
			k.mu.Unlock()
			close(ch)
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-k.clock.After(k.timing.Watch):
			}
			l, err := k.List(ctx, nil)
			if err != nil {
				continue
			}
			for _, st := range l {
				k.NoteDeath(st)
			}
		}
	}()
	return ch, nil
}

// NoteDeath emits a died event for a run that ended, once per run.
func (k *Keeper) NoteDeath(st ContainerStatus) {
	if st.State != StateExited || st.Infra {
		return
	}
	k.mu.Lock()
	if !k.watching || k.starting[st.ID] {
		k.mu.Unlock()
		return
	}
	if t, ok := k.reported[st.ID]; ok && t.Equal(st.FinishedAt) {
		k.mu.Unlock()
		return
	}
	k.reported[st.ID] = st.FinishedAt
	k.mu.Unlock()
	k.Emit(EventDied, ContainerSpec{ID: st.ID, Labels: st.Labels}, st.ExitCode)
}

// StartLock holds off other starts of container id until unlock is
// called.
func (k *Keeper) StartLock(id string) (unlock func()) {
	k.mu.Lock()
	l, ok := k.startLocks[id]
	if !ok {
		l = &sync.Mutex{}
		k.startLocks[id] = l
	}
	k.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Startable reads the record of a container asked to start; ok is false
// when there is nothing to start (an infra container, or one running). A
// run that ended is reported before the next begins.
func (k *Keeper) Startable(ctx context.Context, id string) (rec Record, ok bool, err error) {
	rec, err = k.records.Get(id)
	if err != nil || rec.Spec.Infra {
		return rec, false, err
	}
	st, err := k.Status(ctx, rec)
	if err != nil || st.State == StateRunning {
		return rec, false, err
	}
	k.NoteDeath(st)
	return rec, true, nil
}

// NewRun takes the container's start lock, clears the last run's exit
// record and stop request and records a run of boot starting now. The
// caller passes the lock to the supervisor it launches and closes it once
// the run has an exit record or a supervisor: should the caller end in
// between (killed), the lock goes with it and the run counts as over,
// instead of running for good with nothing behind it.
//
// The last run's supervisor holds the lock until it ends, just after it
// writes the exit record that let this start begin: NewRun waits for it,
// as long as a supervisor may take to start (ShimStartTimeout).
func (k *Keeper) NewRun(ctx context.Context, id string, boot int64) (lock *os.File, err error) {
	taken, err := k.poll(ctx, ShimStartTimeout, func() (bool, error) {
		lock, err = k.records.LockStart(id)
		if errors.Is(err, errStartHeld) {
			return false, nil
		}
		return true, err
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("start %s: %w", id, err)
	case err != nil:
		return nil, err // LockStart's, naming the container
	case !taken:
		return nil, fmt.Errorf("start %s: the last run's supervisor, or another start, held on to it for %s", id, ShimStartTimeout)
	}
	dir := k.records.Path(id)
	os.Remove(filepath.Join(dir, ExitFile))
	os.Remove(filepath.Join(dir, StopFile))
	if err := WriteJSON(filepath.Join(dir, RunFile), RunInfo{Boot: boot, StartedAt: k.clock.Now()}); err != nil {
		lock.Close()
		return nil, err
	}
	return lock, nil
}

// Launching holds back the died event of rec's new run until done is
// called, which reports a run that ended meanwhile: the started event
// comes first.
func (k *Keeper) Launching(ctx context.Context, rec Record) (done func()) {
	id := rec.Spec.ID
	k.mu.Lock()
	k.starting[id] = true
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		delete(k.starting, id)
		k.mu.Unlock()
		if st, err := k.Status(ctx, rec); err == nil {
			k.NoteDeath(st) // a run that ended already
		}
	}
}

// WaitExit polls for a run's exit record until d has passed.
func (k *Keeper) WaitExit(ctx context.Context, id string, d time.Duration) (bool, error) {
	return k.poll(ctx, d, func() (bool, error) {
		_, ok, err := k.records.Exit(id)
		return ok, err
	})
}

// poll calls try at the Keeper's poll pace until it is done or fails, or
// d has passed (false), or ctx ends (its error).
func (k *Keeper) poll(ctx context.Context, d time.Duration, try func() (done bool, err error)) (bool, error) {
	deadline := k.clock.Now().Add(d)
	for {
		if done, err := try(); done || err != nil {
			return done, err
		}
		if !k.clock.Now().Before(deadline) {
			return false, nil
		}
		select {
		case <-k.clock.After(k.timing.Poll):
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Killed waits up to d for the supervisor's exit record of a run just
// killed and, when none comes, writes one (KILL, 137) that says why.
func (k *Keeper) Killed(ctx context.Context, id string, d time.Duration, why string) error {
	ok, err := k.WaitExit(ctx, id, d)
	if ok || err != nil {
		return err
	}
	return WriteJSON(filepath.Join(k.records.Path(id), ExitFile), ExitInfo{
		Code: 137, Signal: "KILL", FinishedAt: k.clock.Now(), Message: why,
	})
}

// Stop implements Runtime: the supervisor is asked to stop the process
// (signal, grace period, kill) and report; should it not report in time,
// the Driver kills the run.
func (k *Keeper) Stop(ctx context.Context, id string, grace time.Duration) error {
	rec, err := k.records.Get(id)
	if err != nil || rec.Spec.Infra {
		return err
	}
	st, err := k.Status(ctx, rec)
	if err != nil {
		return err
	}
	if st.State != StateRunning {
		return k.driver.Settle(ctx, rec)
	}
	if grace < 0 {
		grace = rec.Spec.Grace()
	}
	run, _, err := k.records.Run(id)
	if err != nil {
		return err
	}
	if err := WriteJSON(filepath.Join(k.records.Path(id), StopFile), StopRequest{Grace: grace}); err != nil {
		return err
	}
	if run.ShimPid != 0 {
		if err := k.driver.AskStop(ctx, run.ShimPid); err != nil {
			k.log.Warn("supervisor did not take the stop request", "container", id, "pid", run.ShimPid, "err", err)
		}
	}
	if ok, err := k.WaitExit(ctx, id, grace+k.timing.ShimMargin); ok || err != nil {
		return err
	}
	return k.driver.Kill(ctx, rec, run)
}

// Remove implements Runtime: a running container is stopped at once (its
// supervisor ends it and reports; should it not, Stop has it killed), a
// pod's members go before it, and the Driver releases what Create made.
func (k *Keeper) Remove(ctx context.Context, id string) error {
	rec, err := k.records.Get(id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		ids, err := k.records.IDs()
		if err != nil {
			return err
		}
		for _, mid := range ids {
			if m, err := k.records.Get(mid); err == nil && m.Spec.Pod == id {
				if err := k.Remove(ctx, mid); err != nil {
					return err
				}
			}
		}
	} else {
		st, err := k.Status(ctx, rec)
		if err != nil {
			return err
		}
		if st.State == StateRunning {
			if err := k.Stop(ctx, id, 0); err != nil {
				return err
			}
			if st, err = k.Status(ctx, rec); err != nil {
				return err
			}
		}
		if err := k.driver.Settle(ctx, rec); err != nil {
			return err
		}
		k.NoteDeath(st)
	}
	// Before the record goes: a root removed with mounts in it would take
	// their sources' files along.
	if err := k.driver.Release(ctx, rec); err != nil {
		return err
	}
	if err := k.records.Remove(id); err != nil {
		return err
	}
	k.mu.Lock()
	delete(k.reported, id)
	delete(k.startLocks, id)
	k.mu.Unlock()
	k.Emit(EventRemoved, rec.Spec, 0)
	return nil
}

// ExecTarget reads the record of a container a command is to run in;
// ErrNotRunning unless it runs a process.
func (k *Keeper) ExecTarget(ctx context.Context, id string) (Record, error) {
	rec, err := k.records.Get(id)
	if err != nil {
		return Record{}, err
	}
	st, err := k.Status(ctx, rec)
	if err != nil {
		return Record{}, err
	}
	if rec.Spec.Infra || st.State != StateRunning {
		return Record{}, fmt.Errorf("exec in %s: %w", id, ErrNotRunning)
	}
	return rec, nil
}

// Logs implements Runtime: the container's log records, the rotated
// file's first; with Follow, new records as the supervisor writes them
// until ctx ends, the reader is closed or the container is removed (its
// output then read to the end). A container removed before any file of
// its log was read is ErrNotFound, at the start or as the follow's end:
// what it wrote went with its directory, and only its owner may have
// kept it (an agent's saved output), not an empty log.
func (k *Keeper) Logs(ctx context.Context, id string, opts LogOptions) (io.ReadCloser, error) {
	if _, err := k.records.Get(id); err != nil {
		return nil, err
	}
	f := &LogFollower{Path: filepath.Join(k.records.Path(id), LogFileName)}
	removedUnread := func() error {
		return fmt.Errorf("container %s, removed before its log was read: %w", id, ErrNotFound)
	}
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
	if err == nil && f.Unread() && k.records.Gone(id) {
		err = removedUnread() // removed since the lookup above
	}
	if err != nil || !opts.Follow {
		f.Close()
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(first)), nil
	}
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	k.wg.Add(1)
	go func() {
		defer k.wg.Done()
		defer pw.Close()
		defer f.Close()
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
			case <-k.clock.After(k.timing.Poll):
			}
			gone := k.records.Gone(id) // asked first: render then reads all it wrote
			if next, err = render(); err != nil {
				pw.CloseWithError(err)
				return
			}
			if gone && len(next) == 0 {
				// Removed, and nothing was written after: what a follow of
				// a task whose pod went reads to its end, as docker logs -f
				// ends with its container.
				if f.Unread() {
					pw.CloseWithError(removedUnread())
				}
				return
			}
		}
	}()
	return &stoppingReader{PipeReader: pr, stop: stop}, nil
}

// stoppingReader ends a log follower when closed.
type stoppingReader struct {
	*io.PipeReader
	stop chan struct{}
	once sync.Once
}

func (r *stoppingReader) Close() error {
	r.once.Do(func() { close(r.stop) })
	return r.PipeReader.Close()
}
