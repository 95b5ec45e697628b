package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/jsonfast"
	bolt "go.etcd.io/bbolt"
)

// Timing is Raft's timing. Production uses DefaultTiming; tests shorten it.
type Timing struct {
	// HeartbeatTimeout is how long a follower waits without hearing from
	// the leader before it stands; raft waits between it and twice it.
	// The leader sends heartbeats every tenth of it (randomised up to a
	// fifth), and each replication call must answer within it.
	HeartbeatTimeout time.Duration
	// ElectionTimeout is how long a candidate waits for votes.
	ElectionTimeout time.Duration
	// LeaderLeaseTimeout is how long a leader stays without a quorum.
	LeaderLeaseTimeout time.Duration
	// ElectionJitter and StandTimeout bound failover (see standWatch).
	// Raft alone stands between one and three heartbeat timeouts after
	// the last contact, and a candidate turned away waits an election
	// timeout again. With StandTimeout set, a replica that heard nothing
	// for HeartbeatTimeout plus a random part of ElectionJitter (drawn
	// afresh each time, so replicas seldom stand together) stands at once
	// and, until a leader is known, uses StandTimeout as its heartbeat and
	// election timeouts, so a turned-away candidate asks again within two
	// of them; and a replica silent for HeartbeatTimeout votes for a
	// candidate though raft still knows the old leader (screenVote).
	// Raft cannot change the lease while running and needs it to
	// fit in the heartbeat timeout, so StandTimeout is at least the lease.
	// Zero StandTimeout leaves raft's own timer alone.
	ElectionJitter time.Duration
	StandTimeout   time.Duration
	CommitTimeout  time.Duration
	// SnapshotThreshold is how many entries after the last snapshot make
	// the next one; TrailingLogs how many stay in the log after it.
	SnapshotThreshold uint64
	SnapshotInterval  time.Duration
	TrailingLogs      uint64
}

// DefaultTiming is the production timing: heartbeats every 0.5 to 1 s,
// elections after 5 to 10 s of silence, and a leader that heard from no
// quorum for 2 s (two heartbeats at least) steps down. A replica stands
// 5 to 6 s after the leader fell silent, and one that heard nothing for
// 5 s as well votes for it (screenVote), so a new leader is mostly in
// place 5 to 6 s after the old one was last heard; a candidate turned
// away asks again 2 to 4 s later, within 10 s (measured: cluster/server
// BenchmarkFailover, cluster/store BenchmarkFailoverScaled).
func DefaultTiming() Timing {
	return Timing{
		HeartbeatTimeout:   5 * time.Second,
		ElectionTimeout:    5 * time.Second,
		LeaderLeaseTimeout: 2 * time.Second,
		ElectionJitter:     time.Second,
		StandTimeout:       2 * time.Second,
		CommitTimeout:      50 * time.Millisecond,
		SnapshotThreshold:  8192,
		SnapshotInterval:   2 * time.Minute,
		TrailingLogs:       10240,
	}
}

// DefaultWriteTimeout is how long a write or linearizable read waits for
// a quorum before it gives up.
const DefaultWriteTimeout = 30 * time.Second

// Config opens a store.
type Config struct {
	Dir string // the manager's data directory; the file is Dir/store.db
	// Key is the data key every value written is sealed under (KeySize
	// bytes; LoadKey reads or makes one). Nil writes values in the clear;
	// sealed values then cannot be read.
	Key          []byte
	ID           string // this manager's Raft id (its node id)
	Transport    raft.Transport
	Timing       Timing        // zero: DefaultTiming
	WriteTimeout time.Duration // zero: DefaultWriteTimeout
	Logger       *slog.Logger
	// HistorySize is how many events watches can replay; zero means
	// HistorySize.
	HistorySize int
}

// flushDelay is how long applied changes wait in memory before the
// flusher writes them: long enough that a busy replica writes many
// applies in one bbolt commit, whose two fsyncs otherwise compete with the
// log's on the disk (64 clients on three managers: about 4,500 writes/s at
// 20 ms, 5,000-7,000 at 100 ms), short enough that reads scan few pending
// changes and an idle replica's file soon catches up.
const flushDelay = 100 * time.Millisecond

// flushRetry is how soon a failed flush (a full disk, say) is tried again
// when no apply wakes the flusher before.
const flushRetry = time.Second

// Store is one manager's replica.
type Store struct {
	cfg   Config
	db    *bolt.DB
	logs  *logStore
	snaps *snapshotStore
	fsm   *fsm
	hist  *history
	raft  *raft.Raft
	log   *slog.Logger

	readTerm atomic.Uint64 // the leader term whose barrier has applied
	stop     chan struct{} // ends background work at Close
	bg       sync.WaitGroup

	leaderMu      sync.Mutex
	leaderChanged chan struct{} // closed and replaced at each change of leader (watchLeader)

	// reloadMu serialises changes of raft's timing (soloFast and
	// standWatch); normal is the timing they go back to.
	reloadMu sync.Mutex
	normal   raft.ReloadableConfig

	// preVoted is when screenVote last granted a pre-vote (unix
	// nanoseconds): standWatch leaves the candidate its election then.
	preVoted atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// Open opens (or creates) the store in cfg.Dir and starts Raft on it. A
// store with existing state rejoins its cluster from disk and serves
// local reads at once; a new one waits for Bootstrap or to be added by a
// leader.
func Open(cfg Config) (*Store, error) {
	if cfg.Timing == (Timing{}) {
		cfg.Timing = DefaultTiming()
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ID == "" || cfg.Transport == nil {
		return nil, errors.New("store: config needs an ID and a transport")
	}
	if t := cfg.Timing; t.StandTimeout != 0 && (t.StandTimeout > t.HeartbeatTimeout || t.StandTimeout < t.LeaderLeaseTimeout) || t.ElectionJitter < 0 {
		return nil, fmt.Errorf("store: timing: stand timeout %s must be between the leader lease %s and the heartbeat timeout %s (or zero), election jitter %s not negative",
			t.StandTimeout, t.LeaderLeaseTimeout, t.HeartbeatTimeout, t.ElectionJitter)
	}
	s, fail, err := openParts(cfg)
	if err != nil {
		return nil, err
	}
	if err := s.catchUpWithSnapshot(s.fsm.applied.Load()); err != nil {
		return fail(err)
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	t := cfg.Timing
	rc.HeartbeatTimeout = t.HeartbeatTimeout
	rc.ElectionTimeout = t.ElectionTimeout
	rc.LeaderLeaseTimeout = t.LeaderLeaseTimeout
	rc.CommitTimeout = t.CommitTimeout
	rc.SnapshotThreshold = t.SnapshotThreshold
	rc.SnapshotInterval = t.SnapshotInterval
	rc.TrailingLogs = t.TrailingLogs
	// Batching: many writes share one log append (one fdatasync) and one
	// apply.
	rc.MaxAppendEntries = 512
	rc.BatchApplyCh = true
	// The state machine is persistent: never restore the snapshot into it
	// at start, it already holds at least that much.
	rc.NoSnapshotRestoreOnStart = true
	rc.Logger = raftLogger(cfg.Logger)
	logs, err := raft.NewLogCache(1024, s.logs)
	if err != nil {
		return fail(err)
	}
	r, err := raft.NewRaft(rc, s.fsm, logs, s.logs, s.snaps, cfg.Transport)
	if err != nil {
		return fail(fmt.Errorf("starting raft: %w", err))
	}
	s.raft = r
	s.normal = r.ReloadableConfig()
	s.stop = make(chan struct{})
	s.leaderChanged = make(chan struct{})
	s.bg.Add(2)
	go s.flusher()
	go s.watchLeader(s.observeLeader())
	s.soloFast()
	if t.StandTimeout > 0 {
		s.bg.Add(1)
		go s.standWatch()
		if vs, ok := cfg.Transport.(VoteScreener); ok {
			vs.ScreenVotes(s.screenVote)
		}
	}
	return s, nil
}

// checkStateMatchesLog refuses to start on a log whose term and vote, or
// whose state before its first entry, are gone: without them raft could
// vote twice in a term, or apply entries to a state machine missing what
// came before them (store.db lost, or older than the log).
func (s *Store) checkStateMatchesLog(applied uint64, freshVote bool) error {
	first, _ := s.logs.FirstIndex()
	last, _ := s.logs.LastIndex()
	if last == 0 {
		return nil
	}
	dir := filepath.Join(s.cfg.Dir, LogDir)
	if freshVote {
		return fmt.Errorf("the raft log in %s holds entries %d to %d but the term and vote are missing (%s and store.db's copy); %s",
			dir, first, last, voteFileName, boltDamageHelp)
	}
	base := applied
	meta, err := s.snaps.meta()
	if err != nil {
		return err
	}
	if meta != nil {
		base = max(base, meta.Index)
	}
	if first > base+1 {
		return fmt.Errorf("the raft log in %s starts at entry %d but %s holds the state up to entry %d only (missing, or older than the log); %s",
			dir, first, filepath.Join(s.cfg.Dir, FileName), base, boltDamageHelp)
	}
	return nil
}

// catchUpWithSnapshot restores the state machine from the stored snapshot
// when the snapshot is newer: a crash between storing an installed
// snapshot and restoring it leaves it so, and raft, which starts after the
// snapshot and never restores it into a persistent state machine, would
// not apply what the snapshot covers.
func (s *Store) catchUpWithSnapshot(applied uint64) error {
	meta, err := s.snaps.meta()
	if err != nil || meta == nil || meta.Index <= applied {
		return err
	}
	_, rc, err := s.snaps.Open(meta.ID)
	if err != nil {
		return err
	}
	return s.fsm.Restore(rc)
}

// flusher writes applied changes to the file shortly after they were
// applied.
func (s *Store) flusher() {
	defer s.bg.Done()
	flushLoop(s.stop, s.fsm.kick, s.fsm.flush, s.log)
}

// flushLoop calls flush flushDelay after each kick until stop closes. A
// failed flush is not fatal, to the leader or to the changes: they stay
// in memory (reads see them, the log holds them) and the flush is tried
// again at the next kick or after flushRetry. It logs when the error
// changes and when flushing works again, not at every attempt.
func flushLoop(stop <-chan struct{}, kick <-chan struct{}, flush func() error, log *slog.Logger) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	failing := ""
	for {
		select {
		case <-stop:
			return
		case <-kick:
		case <-retry.C:
		}
		t.Reset(flushDelay)
		select {
		case <-stop:
			t.Stop()
			return
		case <-t.C:
		}
		err := flush()
		switch {
		case err != nil:
			if err.Error() != failing {
				failing = err.Error()
				log.Warn("writing applied changes to the store file failed; they stay in memory and the log, and are written again soon",
					"error", failing)
			}
			retry.Reset(flushRetry)
		case failing != "":
			failing = ""
			log.Info("writing applied changes to the store file works again")
		}
	}
}

// soloFast lets the only voter of a cluster elect itself after the leader
// lease (2 s at production timing) instead of the heartbeat timeout (5
// to 10 s): nobody else can lead, so waiting longer (after
// init, or after a one-manager cluster restarts) buys nothing. Once it
// leads, the normal timing is restored.
func (s *Store) soloFast() {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	servers := f.Configuration().Servers
	if len(servers) != 1 || servers[0].ID != raft.ServerID(s.cfg.ID) || servers[0].Suffrage != raft.Voter {
		return
	}
	// Raft requires the lease to fit in the heartbeat timeout, so the
	// lease is as fast as it gets.
	if !s.quicken(s.cfg.Timing.LeaderLeaseTimeout) {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for s.raft.State() != raft.Leader {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
		s.restoreTiming()
	}()
}

// quicken sets raft's heartbeat and election timeouts to at most d (and
// the lease to fit), which makes a follower check at once whether it
// heard from a leader within d. It reports whether anything changed.
func (s *Store) quicken(d time.Duration) bool {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	cur := s.raft.ReloadableConfig()
	fast := cur
	fast.HeartbeatTimeout = min(cur.HeartbeatTimeout, d)
	fast.ElectionTimeout = min(cur.ElectionTimeout, d)
	if fast == cur {
		return false
	}
	if err := s.raft.ReloadConfig(fast); err != nil {
		s.log.Warn("shortening raft's timeouts", "error", err)
		return false
	}
	return true
}

// restoreTiming puts raft's normal timing back.
func (s *Store) restoreTiming() {
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	if s.raft.ReloadableConfig() != s.normal {
		_ = s.raft.ReloadConfig(s.normal)
	}
}

// standWatch makes failover take 5 to 10 s at production timing, as the
// spec says, where raft alone took up to about 15 s. Raft's follower
// checks for silence only when its timer fires, every one to two
// heartbeat timeouts, so it notices a dead leader one to three of them
// after the last contact; and while another follower still knows the old
// leader it turns candidates away, which then wait a whole election
// timeout (at least the heartbeat timeout, raft insists) to ask again.
// Here a replica that heard nothing for HeartbeatTimeout plus its random
// share of ElectionJitter (or that raft made a candidate) switches to
// StandTimeout, which makes raft stand at once and ask again quickly;
// the normal timing comes back once a leader is known.
func (s *Store) standWatch() {
	defer s.bg.Done()
	t := s.cfg.Timing
	threshold := func() time.Duration {
		d := t.HeartbeatTimeout
		if t.ElectionJitter > 0 {
			d += rand.N(t.ElectionJitter)
		}
		return d
	}
	wait := threshold()
	// A replica that never heard from a leader counts silence from now.
	since := time.Now()
	standing := false
	// How often to look: a twentieth of the stand timeout (100 ms at
	// production timing) is all it adds to when a replica stands.
	tick := time.NewTicker(t.StandTimeout / 20)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		state := s.raft.State()
		last := s.raft.LastContact()
		if last.Before(since) {
			last = since
		}
		addr, _ := s.raft.LeaderWithID()
		led := state == raft.Leader || (state == raft.Follower && addr != "" && time.Since(last) < t.HeartbeatTimeout)
		switch {
		case state == raft.Shutdown:
			return
		case led:
			if standing {
				s.restoreTiming()
				standing = false
				wait = threshold()
			}
		case !standing && (state == raft.Candidate || time.Since(last) >= wait && !s.votedLately()):
			standing = true
			s.quicken(t.StandTimeout)
		}
	}
}

// HasState reports whether the store belongs to a cluster already.
func (s *Store) HasState() bool {
	ok, err := raft.HasExistingState(s.logs, s.logs, s.snaps)
	return err == nil && ok
}

// Bootstrap makes this store the one voter of a new cluster.
func (s *Store) Bootstrap(addr string) error {
	cfg := raft.Configuration{Servers: []raft.Server{{
		Suffrage: raft.Voter, ID: raft.ServerID(s.cfg.ID), Address: raft.ServerAddress(addr),
	}}}
	if err := s.raft.BootstrapCluster(cfg).Error(); err != nil {
		return fmt.Errorf("bootstrapping the cluster: %w", err)
	}
	s.soloFast()
	return nil
}

// Raft exposes the Raft node for membership changes and status.
func (s *Store) Raft() *raft.Raft { return s.raft }

// ID is this manager's Raft id.
func (s *Store) ID() string { return s.cfg.ID }

// IsLeader reports whether this replica leads.
func (s *Store) IsLeader() bool { return s.raft.State() == raft.Leader }

// LeaderChanged is closed at the next change of leader this replica
// sees, its own election and loss of leadership included: who waits for
// leadership looks again (IsLeader) at once, not at its next check.
func (s *Store) LeaderChanged() <-chan struct{} {
	s.leaderMu.Lock()
	defer s.leaderMu.Unlock()
	return s.leaderChanged
}

// observeLeader registers for raft's observations of a change of leader,
// before anyone can ask for LeaderChanged: none is missed.
func (s *Store) observeLeader() (<-chan raft.Observation, *raft.Observer) {
	ch := make(chan raft.Observation, 1)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	s.raft.RegisterObserver(obs)
	return ch, obs
}

// watchLeader closes LeaderChanged's channel at each change of leader
// raft observes, until Close. Raft drops an observation while one is
// pending here: the next close covers both, and waiters look again.
func (s *Store) watchLeader(ch <-chan raft.Observation, obs *raft.Observer) {
	defer s.bg.Done()
	defer s.raft.DeregisterObserver(obs)
	for {
		select {
		case <-s.stop:
			return
		case <-ch:
		}
		s.leaderMu.Lock()
		close(s.leaderChanged)
		s.leaderChanged = make(chan struct{})
		s.leaderMu.Unlock()
	}
}

// Leader returns the leader's address and id, empty when there is none.
func (s *Store) Leader() (addr, id string) {
	a, i := s.raft.LeaderWithID()
	return string(a), string(i)
}

// ElectionBound is how long after a replica last heard from a leader a
// new one should be in place with this store's timing, a split vote
// included. Raft alone stands between one and two heartbeat timeouts
// after the silence and a candidate waits up to two election timeouts
// for votes; with StandTimeout (see standWatch) a replica stands a
// heartbeat timeout and its jitter after the silence and each round of
// votes takes up to two StandTimeouts. A replica without a leader for
// longer is likely cut off from the others, not waiting out an election.
func (s *Store) ElectionBound() time.Duration {
	t := s.cfg.Timing
	if t.StandTimeout > 0 {
		return t.HeartbeatTimeout + t.ElectionJitter + 4*t.StandTimeout
	}
	return 2*t.HeartbeatTimeout + 3*t.ElectionTimeout
}

// LastContact is when this replica last heard from a leader (or stepped
// down, or granted a vote: raft counts those as contact too).
func (s *Store) LastContact() time.Time { return s.raft.LastContact() }

// AppliedIndex is the last index this replica's state machine applied.
func (s *Store) AppliedIndex() uint64 { return s.fsm.applied.Load() }

// LogAppends is how many appends to this replica's Raft log reached the
// disk (each one fdatasync) and how many entries they carried: their
// ratio is how well concurrent writes share a sync.
func (s *Store) LogAppends() (appends, entries uint64) {
	return s.logs.wal.appends.Load(), s.logs.wal.appended.Load()
}

// WriteOptions qualify a write.
type WriteOptions struct {
	Precondition Precondition
	// KeepStatus keeps the stored object's status (server-side apply).
	KeepStatus bool
}

// Put writes an object's labels, spec and status (or keeps the stored
// status, with KeepStatus). It returns the object as stored, and what was
// there before (nil when it is new).
func (s *Store) Put(ctx context.Context, o legion.Object, opts WriteOptions) (obj, prev legion.Object, err error) {
	r, err := s.write(ctx, opPut, o, opts)
	if err != nil {
		return nil, nil, err
	}
	if r.err != nil {
		return nil, r.prev, r.err
	}
	obj, err = r.object()
	return obj, r.prev, err
}

// PutInPlace writes o as Put does and, once it is applied, makes o the
// object as stored: its metadata, and with KeepStatus the stored status.
// The caller hands o over for the call and must not share it meanwhile;
// on an error o is left as it was. It spares the writer decoding the
// stored object again (Put's first result), which a writer that built
// the object has no need for.
func (s *Store) PutInPlace(ctx context.Context, o legion.Object, opts WriteOptions) (prev legion.Object, err error) {
	c, err := putCommand(opPut, o, opts)
	if err != nil {
		return nil, err
	}
	r, err := s.apply(ctx, c)
	if err != nil {
		return nil, err
	}
	if r.err != nil {
		return r.prev, r.err
	}
	return r.prev, r.storedInto(o, opts)
}

// storedInto makes o, written with opts, the object this result stored:
// its metadata, and with KeepStatus the status kept.
func (r *result) storedInto(o legion.Object, opts WriteOptions) error {
	if opts.KeepStatus && r.prev != nil {
		if err := copyPart(o.StatusPtr(), r.prev.StatusPtr()); err != nil {
			return err
		}
	}
	m := o.GetMetadata()
	m.Version, m.UID, m.Generation = r.version, r.uid, r.generation
	return nil
}

// PutStatus replaces a stored object's status only: its labels, spec and
// generation stay. It returns the object as stored.
func (s *Store) PutStatus(ctx context.Context, o legion.Object, pre Precondition) (legion.Object, error) {
	r, err := s.writeStatus(ctx, o, pre)
	if err != nil {
		return nil, err
	}
	return r.object()
}

// WriteStatus is PutStatus for a caller that does not read the object
// stored, which then is not decoded: o needs its kind, namespace, name and
// status only.
func (s *Store) WriteStatus(ctx context.Context, o legion.Object, pre Precondition) error {
	_, err := s.writeStatus(ctx, o, pre)
	return err
}

func (s *Store) writeStatus(ctx context.Context, o legion.Object, pre Precondition) (*result, error) {
	r, err := s.write(ctx, opStatus, o, WriteOptions{Precondition: pre})
	if err != nil {
		return nil, err
	}
	return r, r.err
}

// Delete removes an object and returns it as it was, at the deleting
// version.
func (s *Store) Delete(ctx context.Context, kind legion.Kind, namespace, name string, pre Precondition) (legion.Object, error) {
	c := &command{Op: opDelete, Kind: kind, Namespace: namespace, Name: name,
		MustNotExist: pre.MustNotExist, Version: pre.Version}
	r, err := s.apply(ctx, c)
	if err != nil {
		return nil, err
	}
	return r.obj, r.err
}

// write applies the command that writes obj and returns the state
// machine's answer (whose err says whether the write itself was refused).
func (s *Store) write(ctx context.Context, o op, obj legion.Object, opts WriteOptions) (*result, error) {
	c, err := putCommand(o, obj, opts)
	if err != nil {
		return nil, err
	}
	return s.apply(ctx, c)
}

// statusOnly is a status write's object in its command: the status alone,
// since the state machine reads nothing else of it, and a task's spec is
// most of its bytes (every agent report is one, and each goes to every
// replica's log). It is still an object of its kind, so a replica from
// before, which decodes the whole object and takes its status, reads it
// as it read the whole one.
type statusOnly struct {
	APIVersion string      `json:"apiVersion"`
	Kind       legion.Kind `json:"kind"`
	Metadata   statusMeta  `json:"metadata"`
	Status     any         `json:"status,omitempty"`
}

type statusMeta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// putCommand is the command that writes obj.
func putCommand(o op, obj legion.Object, opts WriteOptions) (*command, error) {
	m := obj.GetMetadata()
	if m.Name == "" {
		return nil, fmt.Errorf("%s: metadata.name: missing", obj.GetKind())
	}
	if obj.GetKind().Namespaced() != (m.Namespace != "") {
		return nil, fmt.Errorf("%s %s: metadata.namespace: a namespaced kind needs one, a cluster-scoped kind has none", obj.GetKind(), m.Name)
	}
	var data []byte
	var err error
	if o == opStatus {
		data, err = json.Marshal(statusOnly{APIVersion: legion.APIVersion, Kind: obj.GetKind(),
			Metadata: statusMeta{Name: m.Name, Namespace: m.Namespace}, Status: obj.StatusPtr()})
	} else {
		data, err = legion.MarshalJSON(obj)
	}
	if err != nil {
		return nil, err
	}
	return &command{Op: o, Kind: obj.GetKind(), Namespace: m.Namespace, Name: m.Name, Object: data,
		MustNotExist: opts.Precondition.MustNotExist, Version: opts.Precondition.Version, KeepStatus: opts.KeepStatus}, nil
}

func (s *Store) apply(ctx context.Context, c *command) (*result, error) {
	data, err := c.entry()
	if err != nil {
		return nil, err
	}
	if err := s.roomForWrites(len(data)); err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.Kind, displayKey(c), err)
	}
	f := s.raft.Apply(data, s.cfg.WriteTimeout)
	if err := s.wait(ctx, f, "write", true); err != nil {
		return nil, err
	}
	r, _ := f.Response().(*result)
	if r == nil {
		return nil, fmt.Errorf("%s %s: the state machine gave no answer", c.Kind, displayKey(c))
	}
	return r, nil
}

// roomForWrites refuses a client write of an n-byte entry while the
// leader's log has no room for it ahead (ErrLogFull): a leader whose
// append fails steps down, and as the only voter it would then elect
// itself and fail again, so reads would flap too. What room is left goes
// to raft's own entries (an election's no-op, configurations, read
// barriers), so leadership holds. Each call tries to make room again, so
// writes resume once space is freed. A follower leaves the refusal to
// raft (ErrNotLeader sends the client to the leader).
func (s *Store) roomForWrites(n int) error {
	if !s.IsLeader() {
		return nil
	}
	return s.logs.wal.room(n)
}

// Barrier returns once this replica leads and has applied everything
// committed before the call: reads after it are linearizable.
//
// It is a read index: the first call in a leader's term commits a barrier
// entry (so everything earlier terms committed is applied here); later
// calls only confirm with a quorum that this replica still leads, which
// costs a round trip and no disk write. Writes this leader commits are
// applied here before their callers hear of them, so every write that
// completed before the call is visible to a read after it.
func (s *Store) Barrier(ctx context.Context) error {
	term := s.raft.CurrentTerm()
	if s.readTerm.Load() != term {
		if err := s.wait(ctx, s.raft.Barrier(s.cfg.WriteTimeout), "read", false); err != nil {
			return err
		}
		s.readTerm.Store(term)
	}
	return s.wait(ctx, s.raft.VerifyLeader(), "read", false)
}

// wait waits for a future at most the write timeout, translating raft's
// errors into the store's. The waiting goroutine ends when raft answers;
// raft leaves a future unanswered only when it shut down with the future
// still queued, and then the goroutine stays parked until the process
// exits (raft offers no way to cancel a future).
func (s *Store) wait(ctx context.Context, f raft.Future, what string, mayApply bool) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	t := time.NewTimer(s.cfg.WriteTimeout)
	defer t.Stop()
	still := ""
	if mayApply {
		still = ": the write may still apply"
	}
	select {
	case err := <-done:
		switch {
		case err == nil:
			return nil
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
			return ErrNotLeader
		case errors.Is(err, raft.ErrLeadershipLost):
			return fmt.Errorf("%w: leadership lost during the %s%s", ErrNoQuorum, what, still)
		case errors.Is(err, raft.ErrEnqueueTimeout):
			return fmt.Errorf("%w: the %s was not taken within %s", ErrNoQuorum, what, s.cfg.WriteTimeout)
		case errors.Is(err, raft.ErrRaftShutdown):
			return ErrClosed
		}
		return fmt.Errorf("%s: %w", what, err)
	case <-t.C:
		return fmt.Errorf("%w: no quorum answered the %s within %s%s", ErrNoQuorum, what, s.cfg.WriteTimeout, still)
	case <-ctx.Done():
		return fmt.Errorf("%s: %w%s", what, ctx.Err(), still)
	}
}

// Get reads an object from this replica, with the version it was read at.
func (s *Store) Get(kind legion.Kind, namespace, name string) (legion.Object, uint64, error) {
	var obj legion.Object
	at, err := s.readObject(kind, namespace, name, func(raw []byte) (err error) {
		obj, err = legion.FromJSONAs(kind, raw)
		return err
	})
	return obj, at, err
}

// Decode reads an object from this replica into v, with the version it
// was read at, as Get does. v is a struct of the fields the caller needs,
// named as the object's JSON names them: the decoder passes over the
// rest, so an agent's report, which checks a task's node, status and
// version, does not decode the task's whole spec.
func (s *Store) Decode(kind legion.Kind, namespace, name string, v any) (uint64, error) {
	return s.readObject(kind, namespace, name, func(raw []byte) error {
		if err := jsonfast.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("decoding %s: %w", kind, err)
		}
		return nil
	})
}

// readObject calls decode with the object's stored JSON, which is valid
// only during the call; ErrNotFound when there is none.
func (s *Store) readObject(kind legion.Kind, namespace, name string, decode func(raw []byte) error) (uint64, error) {
	var at uint64
	found := false
	err := s.fsm.read(func(r *reader) error {
		at = r.v.applied
		raw := r.get([]byte(legion.Key(kind, namespace, name)))
		if raw == nil {
			return nil
		}
		found = true
		return decode(raw)
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return at, &notFoundError{kind: kind, namespace: namespace, name: name}
	}
	return at, nil
}

// notFoundError is ErrNotFound for one object, its text made only when
// asked for: admission looks up every object an apply creates, and
// formatting each miss was a fifth of the lookup's cost.
type notFoundError struct {
	kind            legion.Kind
	namespace, name string
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.kind, displayName(e.namespace, e.name), ErrNotFound)
}

func (e *notFoundError) Unwrap() error { return ErrNotFound }

// List reads the objects of a kind from this replica (all namespaces when
// namespace is empty), in key order, with the version they were read at.
// A nil filter keeps every object.
func (s *Store) List(kind legion.Kind, namespace string, keep func(legion.Object) bool) ([]legion.Object, uint64, error) {
	var out []legion.Object
	var at uint64
	p := []byte(prefix(kind, namespace))
	err := s.fsm.read(func(r *reader) error {
		at = r.v.applied
		return r.scan(p, func(k, v []byte) error {
			o, err := legion.FromJSONAs(kind, v)
			if err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			if keep == nil || keep(o) {
				out = append(out, o)
			}
			return nil
		})
	})
	return out, at, err
}

// Count is how many objects of a kind this replica holds (in all
// namespaces when namespace is empty), reading no object.
func (s *Store) Count(kind legion.Kind, namespace string) (int, error) {
	return s.CountOf([]legion.Kind{kind}, namespace)
}

// CountOf is Count of several kinds together, all read at one version.
func (s *Store) CountOf(kinds []legion.Kind, namespace string) (int, error) {
	n := 0
	err := s.fsm.read(func(r *reader) error {
		for _, kind := range kinds {
			err := r.walk([]byte(prefix(kind, namespace)), false, func(_, _ []byte) error {
				n++
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

// AfterRead is the version to Watch from to follow on from a read at
// version at. A read at 0 (nothing applied yet: a store just elected)
// must not ask Watch for 0, which means what is applied by the time it
// is called, maybe past the read. The log's first entry is Raft's
// configuration, never an event, so from 1 misses nothing after 0.
func AfterRead(at uint64) uint64 { return max(at, 1) }

// Watch follows the events after version from (from this replica), of
// the kinds given or of every kind when none are. Zero means from what
// this replica has applied now. A watch of some kinds is not woken by
// the others' changes.
func (s *Store) Watch(from uint64, kinds ...legion.Kind) (*Watcher, error) {
	if from == 0 {
		from = s.AppliedIndex()
	}
	return s.hist.watch(from, kinds)
}

// FirstIndex is the oldest entry the log still holds (0 when empty).
func (s *Store) FirstIndex() uint64 {
	i, _ := s.logs.FirstIndex()
	return i
}

// Snapshot takes a snapshot now and compacts the log behind it.
func (s *Store) Snapshot() error { return s.raft.Snapshot().Error() }

// Close shuts Raft down (and with it the transport), ends watches and
// closes the file. It returns only once the file is closed, so the same
// directory can be opened again at once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.hist.close()
		close(s.stop)
		s.bg.Wait()
		err := s.raft.Shutdown().Error()
		// What raft applied last: a restart then re-applies nothing.
		if ferr := s.fsm.flush(); err == nil {
			err = ferr
		}
		if werr := s.logs.wal.Close(); err == nil {
			err = werr
		}
		if verr := s.logs.vote.close(); err == nil {
			err = verr
		}
		if cerr := s.db.Close(); err == nil {
			err = cerr
		}
		s.closeErr = err
	})
	return s.closeErr
}

// openParts opens the store's files and state machine in cfg.Dir, without
// Raft. fail closes them and returns err wrapped, for the caller's
// failures after.
func openParts(cfg Config) (s *Store, fail func(error) (*Store, error), err error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	db, err := openCompacted(filepath.Join(cfg.Dir, FileName), cfg.Logger)
	if err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	// The lock on the bbolt file guards the log directory too.
	wal, err := openWAL(filepath.Join(cfg.Dir, LogDir), cfg.Logger)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	var vote *voteFile
	fail = func(err error) (*Store, error) {
		if vote != nil {
			vote.close()
		}
		wal.Close()
		db.Close()
		return nil, fmt.Errorf("store: %w", err)
	}
	early := func(err error) (*Store, func(error) (*Store, error), error) {
		_, err = fail(err)
		return nil, nil, err
	}
	if err := moveBoltLog(db, wal); err != nil {
		return early(err)
	}
	vote, freshVote, err := openVoteFile(filepath.Join(cfg.Dir, LogDir), db)
	if err != nil {
		vote = nil
		return early(err)
	}
	seal, err := newSealer(cfg.Key)
	if err != nil {
		return early(err)
	}
	var applied uint64
	if err := db.View(func(tx *bolt.Tx) error {
		var err error
		applied, err = readApplied(tx, seal)
		return err
	}); err != nil {
		return early(err)
	}
	s = &Store{cfg: cfg, db: db, log: cfg.Logger}
	s.logs = &logStore{wal: wal, vote: vote, seal: seal}
	s.snaps = &snapshotStore{db: db, seal: seal}
	if err := s.checkStateMatchesLog(applied, freshVote); err != nil {
		return early(err)
	}
	// History starts empty after a restart: a watch from before what this
	// replica had applied at open is compacted.
	if cfg.HistorySize <= 0 {
		cfg.HistorySize = HistorySize
	}
	s.hist = newHistory(cfg.HistorySize, applied)
	s.fsm = newFSM(db, seal, &committer{db: db}, s.hist, cfg.Logger, applied)
	return s, fail, nil
}

// closeParts closes what openParts opened (a store without Raft).
func (s *Store) closeParts() error {
	s.hist.close()
	err := s.fsm.flush()
	if werr := s.logs.wal.Close(); err == nil {
		err = werr
	}
	if verr := s.logs.vote.close(); err == nil {
		err = verr
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	return err
}

// raftLogger passes raft's warnings and errors to the store's logger at
// their own levels, with raft's fields as attributes.
func raftLogger(l *slog.Logger) hclog.Logger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: hclog.Off, Output: io.Discard})
	il.RegisterSink(raftSink{l})
	return il
}

// raftSink is where raft's log lines go (hclog's sink interface).
type raftSink struct{ l *slog.Logger }

func (s raftSink) Accept(name string, level hclog.Level, msg string, args ...interface{}) {
	var lv slog.Level
	switch {
	case level >= hclog.Error:
		lv = slog.LevelError
	case level == hclog.Warn:
		lv = slog.LevelWarn
		// A manager that starts, or a follower whose leader went, elects:
		// nothing is wrong yet.
		if strings.HasPrefix(msg, "heartbeat timeout reached, starting election") {
			lv = slog.LevelInfo
		}
	case level == hclog.Info:
		// How elections went (a candidate, a pre-vote turned away, a
		// leader elected): there when a daemon or a test asks for debug.
		lv = slog.LevelDebug
	default:
		return // raft's own debug chatter stays out
	}
	s.l.Log(context.Background(), lv, msg, append([]any{"component", name}, args...)...)
}
