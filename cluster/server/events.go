package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/events"
	"github.com/legionbsd/legion/cluster/rbac"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// eventsRetry is how long the event feed waits before listing again
// after the store failed to list.
const eventsRetry = time.Second

// eventsMethod is Cluster.Events, which users may call: it filters by
// their rights.
const eventsMethod = "/legion.v1.Cluster/Events"

// eventFeed is this manager's ring of derived events.
type eventFeed struct {
	once sync.Once
	ring *events.Ring
}

func (s *Server) eventRing() *events.Ring {
	s.events.once.Do(func() { s.events.ring = events.NewRing(events.MaxEvents, events.MaxAge, s.cfg.Now) })
	return s.events.ring
}

// startEvents derives events from what st applies until shutdown.
func (s *Server) startEvents(st *store.Store) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.followChanges(s.watchCtx, st, s.eventRing())
	}()
}

// followChanges feeds ring from st's change feed. When the feed loses its
// place (compacted, or a snapshot installed) it lists again and derives
// from the difference, so a transition is at worst seen late, never
// twice.
func (s *Server) followChanges(ctx context.Context, st *store.Store, ring *events.Ring) {
	var tr *events.Tracker
	for ctx.Err() == nil {
		objs, at, err := listTracked(st)
		if err != nil {
			if errors.Is(err, store.ErrClosed) {
				return
			}
			s.log.Warn("events: listing objects", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(eventsRetry):
			}
			continue
		}
		if tr == nil {
			tr = events.NewTracker(objs)
		} else {
			ring.Add(at, tr.Resync(objs, s.cfg.Now())...)
		}
		w, err := st.Watch(store.AfterRead(at), trackedKinds...)
		if err != nil {
			if errors.Is(err, store.ErrClosed) {
				return
			}
			continue // compacted already: list again
		}
		for {
			e, err := w.Next(ctx)
			if err != nil {
				if errors.Is(err, store.ErrCompacted) || errors.Is(err, store.ErrReset) {
					break
				}
				return
			}
			ring.Add(e.Version, tr.Change(e.Object, e.Type == store.Deleted, s.cfg.Now())...)
		}
	}
}

// trackedKinds are the kinds events come from; their watch is not woken
// by the others' writes (Configs, Secrets, the audit's batches).
var trackedKinds = slices.DeleteFunc(legion.Kinds(), func(k legion.Kind) bool { return !events.Tracked(k) })

// listTracked lists every kind events come from. Each kind is read at
// its own version; the watch starts from the lowest, and a change seen
// twice derives nothing the second time.
func listTracked(st *store.Store) ([]legion.Object, uint64, error) {
	var all []legion.Object
	var from uint64
	for _, k := range trackedKinds {
		objs, at, err := st.List(k, "", nil)
		if err != nil {
			return nil, 0, err
		}
		if from == 0 || at < from {
			from = at
		}
		all = append(all, objs...)
	}
	return all, from, nil
}

// Events sends this manager's events, narrowed by the request and the
// caller's read rights; every manager derives the same, so none forwards.
func (c *clusterService) Events(req *pb.EventsRequest, out grpc.ServerStreamingServer[pb.ClusterEvent]) error {
	s := c.s
	if s.store() == nil {
		return s.notServing(s.role())
	}
	kind := legion.Kind(req.Kind)
	if kind != "" && !kind.Known() {
		return status.Errorf(codes.InvalidArgument, "events: unknown kind %q", req.Kind)
	}
	if t := legion.EventType(req.Type); t != "" && t != legion.EventNormal && t != legion.EventWarning {
		return status.Errorf(codes.InvalidArgument, "events: type %q: expected %s or %s", req.Type, legion.EventNormal, legion.EventWarning)
	}
	a, err := s.accessOf(out.Context())
	if err != nil {
		return err
	}
	// Asking for one namespace (or a cluster-scoped kind) needs the right
	// to read there: tasks stand for every kind when none is named. Wider
	// asks see only what the caller may read.
	switch {
	case kind != "" && (!filtersList(kind, req.Namespace) || kind == legion.KindNamespace && req.Name != ""):
		if err := a.checkNamed(rbac.Read, kind, req.Namespace, req.Name); err != nil {
			return err
		}
	case kind == "" && req.Namespace != "" && a != nil:
		if err := rbac.CheckAction(a.bindings, a.user, rbac.Read, legion.KindTask, req.Namespace, "read its events"); err != nil {
			return status.Error(codes.PermissionDenied, err.Error())
		}
	}
	f := events.Filter{After: req.AfterSequence, Kind: kind, Namespace: req.Namespace, Name: req.Name,
		Type: legion.EventType(req.Type),
		Keep: func(e legion.Event) bool {
			return a == nil || a.checkNamed(rbac.Read, e.Object.Kind, e.Object.Namespace, e.Object.Name) == nil
		}}
	if req.SinceUnixNano != 0 {
		f.Since = time.Unix(0, req.SinceUnixNano)
	}
	send := func(e legion.Event) error { return out.Send(eventProto(e)) }
	ring := s.eventRing()
	if !req.Follow {
		for _, e := range ring.Read(f) {
			if err := send(e); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancelCause(out.Context())
	defer cancel(nil)
	stop := context.AfterFunc(s.watchCtx, func() { cancel(nil) })
	defer stop()
	go s.endWhenLowered(ctx, a, cancel, "events")
	err = ring.Follow(ctx, f, send)
	switch {
	case s.watchCtx.Err() != nil:
		return status.Error(codes.Unavailable, "the manager is shutting down")
	case status.Code(context.Cause(ctx)) == codes.PermissionDenied:
		return context.Cause(ctx)
	}
	return err
}

func eventProto(e legion.Event) *pb.ClusterEvent {
	p := &pb.ClusterEvent{Sequence: e.Sequence, TimeUnixNano: e.Time.UnixNano(), Type: string(e.Type), Reason: e.Reason,
		Kind: string(e.Object.Kind), Namespace: e.Object.Namespace, Name: e.Object.Name, Uid: e.Object.UID,
		Message: e.Message, Count: int32(e.Count)}
	if !e.First.IsZero() {
		p.FirstUnixNano = e.First.UnixNano()
	}
	return p
}
