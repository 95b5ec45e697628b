package server

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/audit"
	"github.com/legionbsd/legion/cluster/pki"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// auditActions are the methods audited whatever their outcome: the
// changes and the sessions (9). Any other call is audited only when it
// is refused for the caller's rights; reads and watches otherwise not.
var auditActions = map[string]string{
	"/legion.v1.Objects/Apply":       audit.ActionApply,
	"/legion.v1.Objects/Delete":      audit.ActionDelete,
	"/legion.v1.Cluster/Init":        "init",
	"/legion.v1.Cluster/Join":        "join",
	"/legion.v1.Cluster/Promote":     "promote",
	"/legion.v1.Cluster/SetVoter":    "set-voter",
	"/legion.v1.Cluster/TokenRotate": "token-rotate",
	"/legion.v1.Cluster/IssueUser":   "issue-user",
	"/legion.v1.Cluster/Autolock":    "autolock",
	"/legion.v1.Cluster/Unlock":      "unlock",
	"/legion.v1.Cluster/RevokeUser":  "revoke-user",
	"/legion.v1.Cluster/RotateCA":    "rotate-ca",
	"/legion.v1.Pods/Logs":           "logs",
	"/legion.v1.Pods/Exec":           "exec",
	"/legion.v1.Pods/PortForward":    "port-forward",
	"/legion.v1.Volumes/Backup":      "volume-backup",
	"/legion.v1.Volumes/Restore":     "volume-restore",
}

// sessionActions are recorded once the session is open (its first frame
// to the caller), not when it ends.
var sessionActions = map[string]bool{"logs": true, "exec": true, "port-forward": true}

// AuditRecorder holds the events this manager recorded until they are
// written (leader) or handed to the leader.
func (s *Server) AuditRecorder() *audit.Recorder { return s.audit }

// AuditStore is the store the audit flusher writes to, nil while the
// daemon is no manager.
func (s *Server) AuditStore() audit.Leading {
	if st := s.store(); st != nil {
		return st
	}
	return nil
}

// HandAudit passes events to the leader (kept here when this manager
// leads).
func (s *Server) HandAudit(ctx context.Context, events []audit.Event) error {
	_, conn, fctx, err := s.leader(ctx)
	if err != nil {
		return err
	}
	if conn == nil {
		s.audit.Record(events...)
		return nil
	}
	req := &pb.RecordAuditRequest{Events: make([]*pb.AuditEvent, len(events))}
	for i, e := range events {
		req.Events[i] = eventToProto(e)
	}
	_, err = pb.NewClusterClient(conn).RecordAudit(fctx, req)
	return err
}

// RecordAudit takes a follower's events; they are held with this
// manager's own and written (or handed on) with them.
func (c *clusterService) RecordAudit(ctx context.Context, req *pb.RecordAuditRequest) (*pb.RecordAuditResponse, error) {
	if id := callerOf(ctx).id; id == nil || id.Role != pki.RoleManager {
		return nil, status.Error(codes.PermissionDenied, "audit events are handed on by managers only")
	}
	events := make([]audit.Event, len(req.Events))
	for i, e := range req.Events {
		events[i] = eventFromProto(e)
	}
	c.s.audit.Record(events...)
	return &pb.RecordAuditResponse{}, nil
}

// Audit lists the kept events from this manager's replica.
func (c *clusterService) Audit(req *pb.AuditRequest, out grpc.ServerStreamingServer[pb.AuditEvent]) error {
	if id := callerOf(out.Context()).id; id == nil || (id.Role != pki.RoleAdmin && id.Role != pki.RoleManager) {
		return status.Error(codes.PermissionDenied, "the audit trail is the cluster admin's to read")
	}
	st := c.s.store()
	if st == nil {
		return c.s.notServing(c.s.role())
	}
	f := audit.Filter{Actor: req.Actor, Action: req.Action, Namespace: req.Namespace, Kind: req.Kind, Denied: req.Denied}
	if req.SinceUnixNano != 0 {
		f.Since = time.Unix(0, req.SinceUnixNano)
	}
	events, err := audit.Read(st, f)
	if err != nil {
		return toStatus(err)
	}
	for _, e := range events {
		if err := out.Send(eventToProto(e)); err != nil {
			return err
		}
	}
	return nil
}

func eventToProto(e audit.Event) *pb.AuditEvent {
	return &pb.AuditEvent{TimeUnixNano: e.Time.UnixNano(), Actor: e.Actor, Role: e.Role, From: e.From, Action: e.Action,
		Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, Outcome: string(e.Outcome), Message: e.Message, Manager: e.Manager}
}

func eventFromProto(e *pb.AuditEvent) audit.Event {
	return audit.Event{Time: time.Unix(0, e.TimeUnixNano).UTC(), Actor: e.Actor, Role: e.Role, From: e.From, Action: e.Action,
		Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, Outcome: audit.Outcome(e.Outcome), Message: e.Message, Manager: e.Manager}
}

// auditCall is one call being audited where it first arrived.
type auditCall struct {
	s       *Server
	base    audit.Event
	action  string // "" when only a refusal is recorded
	session bool
	dryRun  bool

	mu       sync.Mutex
	read     bool        // the request (a stream's first message) was read
	objects  [][3]string // kind, namespace, name
	leader   string      // set when the call was passed on to the leader
	recorded bool
}

type auditKey struct{}

// startAudit prepares the event of a call; nil for a call a follower
// passed on, which the follower records.
func (s *Server) startAudit(ctx context.Context, method string) *auditCall {
	c := callerOf(ctx)
	if c.id != nil && c.id.Role == pki.RoleManager && forwarded(ctx) {
		return nil
	}
	a := &auditCall{s: s, base: audit.Event{Time: s.cfg.Now().UTC(), Manager: s.nodeID}}
	if c.id != nil {
		a.base.Actor, a.base.Role = c.id.Name, string(c.id.Role)
	}
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		a.base.From = p.Addr.String()
	}
	a.action = auditActions[method]
	a.session = sessionActions[a.action]
	if a.action != "" {
		a.base.Action = a.action
	} else {
		a.base.Action = methodAction(method)
	}
	return a
}

// methodAction names a method not audited by name: Objects/Get is "get",
// and a list is "list" whichever way it travels.
func methodAction(method string) string {
	if method == pb.Objects_ListStream_FullMethodName {
		return "list"
	}
	i := strings.LastIndexByte(method, '/')
	return strings.ToLower(method[i+1:])
}

// noteLeader records that the call went on to the leader, which decides.
func noteLeader(ctx context.Context, leader string) {
	if a, ok := ctx.Value(auditKey{}).(*auditCall); ok {
		a.mu.Lock()
		a.leader = leader
		a.mu.Unlock()
	}
}

// request reads the objects a request names; a request never gives its
// specs or values to an event.
func (a *auditCall) request(req any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.read {
		return // only the first message of a stream names them
	}
	a.read = true
	add := func(kind, ns, name string) {
		if ns == "" && legion.Kind(kind).Namespaced() {
			ns = legion.DefaultNamespace
		}
		a.objects = append(a.objects, [3]string{kind, ns, name})
	}
	target := func(t *pb.Target) { add(t.GetKind(), t.GetNamespace(), t.GetName()) }
	switch r := req.(type) {
	case *pb.ApplyRequest:
		a.dryRun = r.DryRun
		for _, it := range r.Items {
			m := it.GetObject().GetMetadata()
			add(it.GetObject().GetKind(), m.GetNamespace(), m.GetName())
		}
	case *pb.DeleteRequest:
		add(r.Kind, r.Namespace, r.Name)
	case *pb.GetRequest:
		add(r.Kind, r.Namespace, r.Name)
	case *pb.ListRequest:
		add(r.Kind, r.Namespace, "")
	case *pb.WatchRequest:
		add(r.Kind, r.Namespace, "")
	case *pb.JoinRequest:
		// A joining node has no certificate yet: it is who it asks to be.
		a.base.Actor, a.base.Role = r.NodeId, r.Role
		add(string(legion.KindNode), "", r.NodeId)
	case *pb.IssueUserRequest:
		add("User", "", r.Name)
	case *pb.TokenRequest:
		add("JoinToken", "", r.Role)
	case *pb.AutolockRequest:
		if a.action != "" {
			a.base.Action = a.action + "-" + r.Action
		}
	case *pb.LogsRequest:
		target(r.Target)
	case *pb.ExecInput:
		target(r.GetStart().GetTarget())
	case *pb.PortForwardInput:
		target(r.Target)
	case *pb.VolumeBackupRequest:
		add(string(legion.KindVolume), r.Namespace, r.Name)
	case *pb.VolumeChunk:
		var h struct{ Namespace, Name string }
		_ = json.Unmarshal(r.Header, &h) // a bad header is the handler's to refuse
		add(string(legion.KindVolume), h.Namespace, h.Name)
	}
}

// finish records the call's events once, with how it ended.
func (a *auditCall) finish(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.recorded {
		return
	}
	a.recorded = true
	e := a.base
	switch c := status.Code(err); {
	case err == nil:
		e.Outcome = audit.OK
	case c == codes.PermissionDenied || c == codes.Unauthenticated:
		e.Outcome = audit.Denied
	default:
		e.Outcome = audit.Error
	}
	if e.Outcome != audit.Denied && (a.action == "" || a.dryRun) {
		return
	}
	if err != nil {
		e.Message = status.Convert(err).Message()
	}
	if a.leader != "" {
		e.Manager = a.leader
	}
	if len(a.objects) == 0 {
		a.s.audit.Record(e)
		return
	}
	events := make([]audit.Event, len(a.objects))
	for i, o := range a.objects {
		events[i] = e
		events[i].Kind, events[i].Namespace, events[i].Name = o[0], o[1], o[2]
	}
	a.s.audit.Record(events...)
}

func (s *Server) unaryAudit(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	a := s.startAudit(ctx, info.FullMethod)
	if a == nil {
		return h(ctx, req)
	}
	a.request(req)
	resp, err := h(context.WithValue(ctx, auditKey{}, a), req)
	a.finish(err)
	return resp, err
}

func (s *Server) streamAudit(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	a := s.startAudit(ss.Context(), info.FullMethod)
	if a == nil {
		return h(srv, ss)
	}
	err := h(srv, auditedStream{ServerStream: ss, a: a, ctx: context.WithValue(ss.Context(), auditKey{}, a)})
	a.finish(err)
	return err
}

// auditedStream reads the objects from a stream's first message and,
// for a session, records it as soon as its first frame goes out.
type auditedStream struct {
	grpc.ServerStream
	a   *auditCall
	ctx context.Context
}

func (s auditedStream) Context() context.Context { return s.ctx }

func (s auditedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.a.request(m)
	}
	return err
}

func (s auditedStream) SendMsg(m any) error {
	if s.a.session {
		s.a.opened(m)
	}
	return s.ServerStream.SendMsg(m)
}

// opened records a session once its first frame, which names the task it
// reached, goes out.
func (a *auditCall) opened(first any) {
	task, _ := first.(interface{ GetTask() string })
	a.mu.Lock()
	if task != nil && task.GetTask() != "" && !a.recorded {
		ns := legion.DefaultNamespace
		if len(a.objects) > 0 && a.objects[0][1] != "" {
			ns = a.objects[0][1]
		}
		a.objects = [][3]string{{string(legion.KindTask), ns, task.GetTask()}}
	}
	a.mu.Unlock()
	a.finish(nil)
}
