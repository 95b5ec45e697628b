package dispatcherclient

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/internal/jsonfast"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/protobuf/proto"
)

// Assignments implements agent.Manager: the node's whole set each time it
// changes, followed through one manager at a time, which sends a whole
// set first and then only changes, applied here; when the stream breaks
// it is opened again on the next manager, which goes on with the changes
// since the node's state where it can tell them (the manager's cache saw
// that point of the cluster's history), and with a whole set where it
// cannot. The channel closes when ctx ends, at Close, or once the node
// was removed (Removed). A set is built
// when the agent is ready to take one, from every change received until
// then: changes arriving while the agent works on a set cost nothing
// more than applying them.
func (s *Session) Assignments(ctx context.Context) (<-chan agent.Assignments, error) {
	out := make(chan agent.Assignments)
	sctx, cancel := s.scope(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		defer close(out)
		s.follow(sctx, out)
	}()
	return out, nil
}

func (s *Session) follow(ctx context.Context, out chan agent.Assignments) {
	wait := s.cfg.Backoff
	for ctx.Err() == nil {
		addr := s.streamAddr()
		got, err := s.followOne(ctx, addr, out)
		if ctx.Err() != nil || s.noteRemoved(err) {
			return
		}
		s.log.Warn("assignments stream ended, going to the next manager", "manager", addr, "err", err)
		if s.cfg.OnStreamEnd != nil {
			s.cfg.OnStreamEnd(err)
		}
		s.nextStream(addr)
		if got {
			wait = s.cfg.Backoff
		}
		woken, ok := s.waitToFollow(ctx, wait)
		if !ok {
			return
		}
		if woken {
			wait = s.cfg.Backoff
			continue
		}
		wait = min(2*wait, s.currentPeriod())
	}
}

// waitToFollow waits d before the stream's next attempt, less if a
// heartbeat gets through meanwhile (woken); ok is false once ctx ends.
func (s *Session) waitToFollow(ctx context.Context, d time.Duration) (woken, ok bool) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false, false
	case <-s.streamWake:
		return true, true
	case <-t.C:
		return false, true
	}
}

// followOne follows the stream of one manager until it fails, reporting
// whether it delivered anything.
func (s *Session) followOne(ctx context.Context, addr string, out chan agent.Assignments) (bool, error) {
	c, err := s.client(addr)
	if err != nil {
		return false, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.cutStream, s.streamOn = cancel, addr
	s.mu.Unlock()
	// A wake left from before this attempt is spent: it would cut short
	// the wait after this stream ends for nothing heard since.
	select {
	case <-s.streamWake:
	default:
	}
	defer func() {
		s.mu.Lock()
		s.cutStream, s.streamOn = nil, ""
		s.mu.Unlock()
	}()
	s.mu.Lock()
	h := s.held
	s.mu.Unlock()
	st, err := c.Assignments(sctx, &legionpb.AssignmentsRequest{Node: s.cfg.Node, Deltas: true, EndpointTasks: true, SharedChanges: true, TypedValues: true,
		MembersBesideEndpoints: true, MembersKept: true, ResumeVersion: h.version, ResumeTerm: h.term})
	if err != nil {
		return false, err
	}
	f := newFollower()
	f.at = h
	defer func() {
		// After the hand-overs stopped (deferred below, so run before):
		// what the stream left is where the next one resumes.
		f.mu.Lock()
		left := f.at
		f.mu.Unlock()
		s.mu.Lock()
		s.held = left
		s.mu.Unlock()
	}()
	hctx, stopHanding := context.WithCancel(sctx)
	handed := make(chan struct{})
	go func() {
		defer close(handed)
		f.handOver(hctx, out)
	}()
	defer func() {
		stopHanding()
		<-handed
	}()
	got := false
	for {
		set, err := st.Recv()
		if err != nil {
			return got, err
		}
		s.mu.Lock()
		s.streamHeard = time.Now()
		s.mu.Unlock()
		var m Message
		if s.cfg.OnAssignments != nil {
			m = Message{Size: proto.Size(set), Delta: set.GetDelta()}
		}
		if err := f.take(set); err != nil {
			// Only whole sets reach the agent: a manager sending what this
			// agent cannot read is left for another, which starts again
			// with a whole set.
			return got, fmt.Errorf("manager %s: %w", addr, err)
		}
		got = true
		if s.cfg.OnAssignments != nil {
			if m.Delta {
				// Taken, a delta holds the changes it shared with other
				// nodes' too.
				m.Whole = wholeParts(set)
			}
			s.cfg.OnAssignments(m)
		}
	}
}

// Message is what Config.OnAssignments is told of a message of the
// assignments stream.
type Message struct {
	Size  int  // as encoded on the wire
	Delta bool // changes since the message before, not a whole set
	// Whole is the parts a delta carried whole, each in place of what the
	// node held of it: a resumed stream's values and volumes, which the
	// manager works out per node, or a part whose changes since the
	// node's last message the manager no longer held, so that a small
	// delta can carry most of a whole set.
	Whole []WholePart
}

// WholePart is a part a delta carried whole.
type WholePart struct {
	Name  string // the part's name in the AssignmentSet, without "_changes"
	Bytes int    // as encoded
}

// wholeParts lists the parts a delta (with its shared changes merged in)
// carries whole.
func wholeParts(set *legionpb.AssignmentSet) []WholePart {
	var out []WholePart
	for _, p := range []struct {
		name string
		it   *legionpb.Items
	}{{"task", set.GetTaskChanges()}, {"value", set.GetValueChanges()}, {"volume", set.GetVolumeChanges()},
		{"endpoint", set.GetEndpointChanges()}, {"peer", set.GetPeerChanges()}, {"route", set.GetRouteChanges()},
		{"member", set.GetMemberChanges()}, {"endpoint_service", set.GetEndpointServiceChanges()},
		{"endpoint_task", set.GetEndpointTaskChanges()}} {
		if p.it.GetReplace() {
			out = append(out, WholePart{p.name, proto.Size(p.it)})
		}
	}
	return out
}

// follower holds the node's assignments as one stream leaves them (from
// the state the stream before left) and hands them to the agent as a
// whole set whenever the agent is ready for one.
// Building a set copies every list (every running task in the cluster is
// a policy member), so it is done once per set the agent takes, not once
// per change received: in a rollout changes come every few milliseconds.
type follower struct {
	mu sync.Mutex
	// at is the node's state and the point of the cluster's history it is
	// at: what the stream resumed from, then as its messages leave it.
	// Its state is nil until a whole set, without one to resume from.
	at     held
	dirty  chan struct{}
	builds int // sets built, for tests
}

// held is the node's state at a point of the cluster's history: the
// version and term of the last message taken (zero term: a point no
// manager can resume from).
type held struct {
	cur           *state
	version, term uint64
}

func newFollower() *follower { return &follower{dirty: make(chan struct{}, 1)} }

// take applies one message of the stream. On an error the state is not
// used again.
func (f *follower) take(set *legionpb.AssignmentSet) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case !set.GetDelta():
		as, err := decode(set)
		if err != nil {
			return err
		}
		f.at.cur = stateOf(as)
	case f.at.cur == nil:
		return fmt.Errorf("changes at version %d before a whole set", set.GetVersion())
	default:
		if err := f.at.cur.apply(set); err != nil {
			f.at = held{}
			return err
		}
	}
	f.at.version, f.at.term = set.GetVersion(), set.GetTerm()
	select {
	case f.dirty <- struct{}{}:
	default:
	}
	return nil
}

// handOver builds a set after changes and waits for the agent to take
// it, until ctx ends; changes taken meanwhile make the next set.
func (f *follower) handOver(ctx context.Context, out chan<- agent.Assignments) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.dirty:
		}
		f.mu.Lock()
		if f.at.cur == nil {
			f.mu.Unlock()
			continue
		}
		as := f.at.cur.assignments()
		f.builds++
		f.mu.Unlock()
		select {
		case out <- as:
		case <-ctx.Done():
			return
		}
	}
}

// decode reads a whole set, or fails.
func decode(set *legionpb.AssignmentSet) (agent.Assignments, error) {
	as := agent.Assignments{Tasks: make([]*legion.Task, 0, len(set.GetTasks())), Values: map[string][]byte{}}
	for i, raw := range set.GetTasks() {
		t, err := decodeTask(raw)
		if err != nil {
			return agent.Assignments{}, fmt.Errorf("assignment set at version %d: task %d: %w", set.GetVersion(), i, err)
		}
		as.Tasks = append(as.Tasks, t)
	}
	for k, v := range set.GetValues() {
		as.Values[k] = v
	}
	if raw := set.GetEndpoints(); len(raw) > 0 {
		if err := jsonfast.Unmarshal(raw, &as.Endpoints); err != nil {
			return agent.Assignments{}, fmt.Errorf("assignment set at version %d: endpoints: %w", set.GetVersion(), err)
		}
	}
	// No peers field (a manager from before the mesh) leaves Peers nil:
	// the node's wg0 is left as it is.
	if raw := set.GetPeers(); len(raw) > 0 {
		if err := jsonfast.Unmarshal(raw, &as.Peers); err != nil {
			return agent.Assignments{}, fmt.Errorf("assignment set at version %d: peers: %w", set.GetVersion(), err)
		}
	}
	if raw := set.GetRoutes(); len(raw) > 0 {
		if err := jsonfast.Unmarshal(raw, &as.Routes); err != nil {
			return agent.Assignments{}, fmt.Errorf("assignment set at version %d: routes: %w", set.GetVersion(), err)
		}
	}
	for i, raw := range set.GetVolumes() {
		v, err := decodeVolume(raw)
		if err != nil {
			return agent.Assignments{}, fmt.Errorf("assignment set at version %d: entry %d of volumes: %w", set.GetVersion(), i, err)
		}
		as.Volumes = append(as.Volumes, v)
	}
	if raw := set.GetPolicies(); len(raw) > 0 {
		as.Policies = &endpoints.Policies{}
		if err := jsonfast.Unmarshal(raw, as.Policies); err != nil {
			return agent.Assignments{}, fmt.Errorf("assignment set at version %d: policies: %w", set.GetVersion(), err)
		}
	}
	return as, nil
}

func (s *Session) streamAddr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == "" || !slices.Contains(s.addrs, s.stream) {
		s.stream = s.addrs[spread(s.cfg.Node, len(s.addrs))]
	}
	return s.stream
}

// spread is where in the list of n managers a node's stream starts: by
// its name, so the nodes of a cluster share the managers' streams out
// rather than all following the first (which, when it went, sent every
// node to the next at once, each starting again with a whole set).
func spread(node string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(node))
	return int(h.Sum32() % uint32(n))
}

// nextStream moves the stream to the manager after the one that failed.
func (s *Session) nextStream(failed string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.Index(s.addrs, failed)
	s.stream = s.addrs[(i+1)%len(s.addrs)]
}
