package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// The migrator's timings (4.3 "Stateful migration").
const (
	// MigrationRetryFirst is the wait after an attempt fails, when the one
	// before it succeeded; each further failure in a row doubles it.
	MigrationRetryFirst = 5 * time.Second
	// MigrationRetryMax caps the wait, so a node out of space is not sent
	// the full copy every few seconds but is still tried again.
	MigrationRetryMax = 5 * time.Minute
	// MigrationResync is how often the migrator reads every Volume again
	// even when the store's watch said nothing: a backstop.
	MigrationResync = 30 * time.Second
)

// MigrationTransfers is how many Volumes the migrator moves at once (one
// transfer per Volume).
const MigrationTransfers = 4

// VolumeMover carries a Volume's data between two nodes through their
// agents' sessions with the managers, and has a node destroy its copy.
// *sessions.Service is one.
type VolumeMover interface {
	CopyVolume(ctx context.Context, from, to string, send *legionpb.VolumeSendOffer, recv *legionpb.VolumeReceiveOffer) error
	DropVolume(ctx context.Context, node string, drop *legionpb.VolumeDropOffer) error
}

// errDiscarded is a transfer whose result no longer applies: the
// migration was dropped or changed while it ran, so nothing is written.
var errDiscarded = errors.New("the migration changed meanwhile")

// Migrator moves the data of migrating Volumes (4.3): the planner records
// a migration as copying, the migrator sends the full copy and marks it
// copied; once the planner marks it finishing, the migrator sends the
// last part, binds the Volume to the new node, and has the old node drop
// its copy. The leader runs it; a new leader starts over from the states
// recorded.
type Migrator struct {
	Store *store.Store
	Mover VolumeMover
	// Now is the clock attempts are timed by; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger
	// Resync is MigrationResync when zero; Transfers MigrationTransfers.
	Resync    time.Duration
	Transfers int

	mu    sync.Mutex
	busy  map[string]bool         // a transfer or a drop runs for this key
	keys  map[string]snapshotKey  // by Volume uid: the snapshots a migration uses
	drops map[string]*pendingDrop // by Volume uid: old copies still to destroy
	wake  chan struct{}
	wg    sync.WaitGroup
}

// snapshotKey names the snapshots of one migration of a Volume: a key this
// leader chose (the Volume's version when it first worked on it, so no
// later migration reuses a name), for the move between from and to.
type snapshotKey struct {
	from, to string
	key      uint64
}

func (k snapshotKey) full() string { return "legion-move-" + strconv.FormatUint(k.key, 10) + "-full" }
func (k snapshotKey) last() string { return "legion-move-" + strconv.FormatUint(k.key, 10) + "-last" }

// pendingDrop is an old copy whose drop failed, tried again after a wait.
type pendingDrop struct {
	namespace, name, uid, node string
	failures                   int
	next                       time.Time
}

// MigrationBackoff is the wait after the n-th failed attempt in a row
// (n >= 1): MigrationRetryFirst, doubling, at most MigrationRetryMax.
func MigrationBackoff(n int) time.Duration {
	d := MigrationRetryFirst
	for i := 1; i < n && d < MigrationRetryMax; i++ {
		d *= 2
	}
	return min(d, MigrationRetryMax)
}

func (m *Migrator) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

func (m *Migrator) log() *slog.Logger {
	if m.Logger != nil {
		return m.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Run moves Volumes until ctx ends (the leadership with it), then waits
// for its transfers, which end with ctx, to return.
func (m *Migrator) Run(ctx context.Context) error {
	m.mu.Lock()
	m.busy, m.keys, m.drops = map[string]bool{}, map[string]snapshotKey{}, map[string]*pendingDrop{}
	m.wake = make(chan struct{}, 1)
	m.mu.Unlock()
	defer m.wg.Wait()
	resync := m.Resync
	if resync <= 0 {
		resync = MigrationResync
	}
	for ctx.Err() == nil {
		at, err := m.Store.Version()
		if err != nil {
			return err
		}
		wait := resync
		next, err := m.pass(ctx)
		if err != nil {
			m.log().Warn("migrating volumes", "err", err)
		} else if !next.IsZero() {
			wait = min(wait, max(next.Sub(m.now()), 0))
		}
		if err := m.waitChange(ctx, at, wait); err != nil {
			return err
		}
	}
	return nil
}

// waitChange returns after a change to Volumes since at, after wait, or
// when a transfer ended; an error only when the store closed.
func (m *Migrator) waitChange(ctx context.Context, at uint64, wait time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	go func() {
		select {
		case <-m.wake:
			cancel()
		case <-wctx.Done():
		}
	}()
	err := m.Store.WaitChange(wctx, at, legion.KindVolume)
	if err != nil && wctx.Err() == nil {
		return err
	}
	return nil
}

// poke wakes Run for another pass.
func (m *Migrator) poke() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// pass starts a transfer for each Volume whose migration is due and has
// none running, and the drops due, as far as the bound allows. It returns
// when the next wait ends (zero: none waits).
func (m *Migrator) pass(ctx context.Context) (time.Time, error) {
	// Listing under the lock orders the list after the write of any
	// transfer that has ended: a transfer marks itself done only after
	// writing, so no pass sees its Volume neither busy nor up to date.
	m.mu.Lock()
	defer m.mu.Unlock()
	objs, _, err := m.Store.List(legion.KindVolume, "", nil)
	if err != nil {
		return time.Time{}, err
	}
	limit := m.Transfers
	if limit <= 0 {
		limit = MigrationTransfers
	}
	now := m.now()
	var next time.Time
	later := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	seen := map[string]*legion.Volume{}
	for _, o := range objs {
		v := o.(*legion.Volume)
		uid := v.Metadata.UID
		seen[uid] = v
		mig := v.Status.Migration
		if k, ok := m.keys[uid]; ok && (mig == nil || mig.From != k.from || mig.To != k.to) {
			delete(m.keys, uid)
		}
		if mig == nil || (mig.State != legion.MigrationCopying && mig.State != legion.MigrationFinishing) || m.busy[uid] {
			continue
		}
		if mig.NextAttempt != nil && mig.NextAttempt.After(now) {
			later(*mig.NextAttempt)
			continue
		}
		if len(m.busy) >= limit || ctx.Err() != nil {
			continue // a transfer ending pokes Run
		}
		m.busy[uid] = true
		m.wg.Add(1)
		go m.transfer(ctx, v)
	}
	for uid := range m.keys {
		if seen[uid] == nil {
			delete(m.keys, uid)
		}
	}
	for uid, d := range m.drops {
		v := seen[uid]
		if v == nil || !dropWanted(v, d.node) {
			delete(m.drops, uid) // gone, or its data is wanted there again
			continue
		}
		if m.busy["drop/"+uid] {
			continue
		}
		if d.next.After(now) {
			later(d.next)
			continue
		}
		if len(m.busy) >= limit || ctx.Err() != nil {
			continue
		}
		m.busy["drop/"+uid] = true
		delete(m.drops, uid)
		m.wg.Add(1)
		go func() {
			defer m.done("drop/" + uid)
			m.drop(ctx, *d)
		}()
	}
	return next, nil
}

// dropWanted says whether node's copy of v is an old one to destroy: v is
// held elsewhere and is not moving to node.
func dropWanted(v *legion.Volume, node string) bool {
	if v.Status.Node == node {
		return false
	}
	m := v.Status.Migration
	return m == nil || m.To != node
}

func (m *Migrator) done(key string) {
	m.mu.Lock()
	delete(m.busy, key)
	m.mu.Unlock()
	m.wg.Done()
	m.poke()
}

// keyFor is the snapshots of v's migration: those chosen before for the
// same move, else new ones keyed by v's version.
func (m *Migrator) keyFor(v *legion.Volume) (k snapshotKey, known bool) {
	mig := v.Status.Migration
	m.mu.Lock()
	defer m.mu.Unlock()
	if k, ok := m.keys[v.Metadata.UID]; ok && k.from == mig.From && k.to == mig.To {
		return k, true
	}
	k = snapshotKey{from: mig.From, to: mig.To, key: v.Metadata.Version}
	m.keys[v.Metadata.UID] = k
	return k, false
}

func (m *Migrator) forget(uid string) {
	m.mu.Lock()
	delete(m.keys, uid)
	m.mu.Unlock()
}

// transfer runs one step of v's migration, copying or finishing, and
// records how it went.
func (m *Migrator) transfer(ctx context.Context, v *legion.Volume) {
	defer m.done(v.Metadata.UID)
	mig := *v.Status.Migration
	log := m.log().With("volume", v.Metadata.Namespace+"/"+v.Metadata.Name, "from", mig.From, "to", mig.To)
	var err error
	if mig.State == legion.MigrationCopying {
		err = m.copyFull(ctx, v)
	} else {
		err = m.finish(ctx, v, log)
	}
	switch {
	case ctx.Err() != nil:
		return // the leadership ended: the next leader starts over
	case errors.Is(err, errDiscarded):
		log.Info("volume migration step discarded", "state", mig.State, "err", err)
	case err != nil:
		log.Warn("volume migration step failed", "state", mig.State, "err", err)
	}
}

// copyFull sends the full copy while the Volume's tasks run on, then
// marks the migration copied.
func (m *Migrator) copyFull(ctx context.Context, v *legion.Volume) error {
	mig := v.Status.Migration
	k, _ := m.keyFor(v)
	if err := m.sendFull(ctx, v, k); err != nil {
		return m.failed(ctx, v, err)
	}
	return m.record(ctx, v, func(s *legion.VolumeStatus) {
		s.Migration.State = legion.MigrationCopied
		s.Migration.Attempt, s.Migration.NextAttempt, s.Migration.Message = 0, nil, ""
	}, mig)
}

func (m *Migrator) sendFull(ctx context.Context, v *legion.Volume, k snapshotKey) error {
	spec, err := json.Marshal(v.Spec)
	if err != nil {
		return err
	}
	send := &legionpb.VolumeSendOffer{Namespace: v.Metadata.Namespace, Volume: v.Metadata.Name, VolumeUid: v.Metadata.UID,
		Snapshot: k.full()}
	recv := &legionpb.VolumeReceiveOffer{Namespace: v.Metadata.Namespace, Volume: v.Metadata.Name, VolumeUid: v.Metadata.UID,
		Spec: spec}
	if err := m.Mover.CopyVolume(ctx, k.from, k.to, send, recv); err != nil {
		return fmt.Errorf("full copy from %s to %s: %w", k.from, k.to, err)
	}
	return nil
}

// finish sends the last part onto the full copy (nothing on the old node
// uses the Volume any more), binds the Volume to the new node and has the
// old one drop its copy. A leader that did not send the full copy itself
// does not know its snapshot, so it sends a new full copy first.
func (m *Migrator) finish(ctx context.Context, v *legion.Volume, log *slog.Logger) error {
	mig := v.Status.Migration
	k, known := m.keyFor(v)
	if !known {
		log.Info("the full copy was made under another leader: sending it again")
		if err := m.sendFull(ctx, v, k); err != nil {
			m.forget(v.Metadata.UID)
			return m.failed(ctx, v, err)
		}
	}
	spec, err := json.Marshal(v.Spec)
	if err != nil {
		return err
	}
	send := &legionpb.VolumeSendOffer{Namespace: v.Metadata.Namespace, Volume: v.Metadata.Name, VolumeUid: v.Metadata.UID,
		Snapshot: k.last(), From: k.full()}
	recv := &legionpb.VolumeReceiveOffer{Namespace: v.Metadata.Namespace, Volume: v.Metadata.Name, VolumeUid: v.Metadata.UID,
		Incremental: true, Spec: spec}
	if err := m.Mover.CopyVolume(ctx, k.from, k.to, send, recv); err != nil {
		return m.failed(ctx, v, fmt.Errorf("last part from %s to %s: %w", k.from, k.to, err))
	}
	err = m.record(ctx, v, func(s *legion.VolumeStatus) {
		// The new node's claim names how it keeps the data and which
		// snapshots it holds.
		s.Node, s.Backend, s.Migration, s.Snapshots = mig.To, "", nil, nil
	}, mig)
	m.forget(v.Metadata.UID)
	if err != nil {
		return err
	}
	m.drop(ctx, pendingDrop{namespace: v.Metadata.Namespace, name: v.Metadata.Name, uid: v.Metadata.UID, node: mig.From})
	return nil
}

// drop has node destroy its old copy; a failure is kept to try again.
func (m *Migrator) drop(ctx context.Context, d pendingDrop) {
	err := m.Mover.DropVolume(ctx, d.node, &legionpb.VolumeDropOffer{Namespace: d.namespace, Volume: d.name, VolumeUid: d.uid})
	if err == nil || ctx.Err() != nil {
		return
	}
	d.failures++
	d.next = m.now().Add(MigrationBackoff(d.failures))
	m.log().Warn("dropping the old copy of a moved volume", "volume", d.namespace+"/"+d.name, "node", d.node,
		"attempt", d.failures, "next", d.next, "err", err)
	m.mu.Lock()
	m.drops[d.uid] = &d
	m.mu.Unlock()
}

// failed records a failed attempt in the migration: its number in a row,
// when the next starts and why; the state stays.
func (m *Migrator) failed(ctx context.Context, v *legion.Volume, cause error) error {
	if ctx.Err() != nil {
		return cause
	}
	mig := v.Status.Migration
	err := m.record(ctx, v, func(s *legion.VolumeStatus) {
		s.Migration.Attempt++
		next := m.now().Add(MigrationBackoff(s.Migration.Attempt))
		s.Migration.NextAttempt, s.Migration.Message = &next, cause.Error()
	}, mig)
	if err != nil {
		return fmt.Errorf("%w (recording it: %w)", cause, err)
	}
	return cause
}

// record writes change to v's status, as long as v's migration is still
// the one the step ran for (same state, same nodes): a write that lost a
// race with another is applied again onto the Volume as it is now.
func (m *Migrator) record(ctx context.Context, v *legion.Volume, change func(*legion.VolumeStatus), ran *legion.VolumeMigration) error {
	const tries = 5
	for range tries {
		cur := v.Status.Migration
		if v.Metadata.UID == "" || cur == nil || cur.State != ran.State || cur.From != ran.From || cur.To != ran.To {
			return errDiscarded
		}
		w := *v
		mig := *cur
		w.Status.Migration = &mig
		change(&w.Status)
		err := m.Store.WriteStatus(ctx, &w, store.Precondition{Version: v.Metadata.Version})
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
		o, _, err := m.Store.Get(legion.KindVolume, v.Metadata.Namespace, v.Metadata.Name)
		if errors.Is(err, store.ErrNotFound) {
			return errDiscarded
		}
		if err != nil {
			return err
		}
		uid := v.Metadata.UID
		v = o.(*legion.Volume)
		if v.Metadata.UID != uid {
			return errDiscarded
		}
	}
	return fmt.Errorf("volume %s/%s: the status write lost %d races in a row", v.Metadata.Namespace, v.Metadata.Name, tries)
}
