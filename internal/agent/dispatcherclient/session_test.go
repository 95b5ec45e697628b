package dispatcherclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/internal/leakcheck"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
	"github.com/legionbsd/legion/internal/grpcpings"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func newSession(t *testing.T, ca *pki.CA, node string, managers ...string) *dispatcherclient.Session {
	t.Helper()
	return openSession(t, sessionConfig(t, ca, node, managers...))
}

// sessionConfig is the configuration of a test session of node.
func sessionConfig(t *testing.T, ca *pki.CA, node string, managers ...string) dispatcherclient.Config {
	t.Helper()
	return dispatcherclient.Config{
		Managers: managers,
		TLS:      dispatchertest.Credentials(t, ca, node, pki.RoleWorker).ClientConfig(),
		Status:   func() legion.NodeStatus { return legion.NodeStatus{Hostname: node, Version: "test"} },
		Usage: func() []legion.Usage {
			return []legion.Usage{{Namespace: "web", Task: "a-1", CPU: 100, Memory: 1 << 20}}
		},
		Backoff: 20 * time.Millisecond,
	}
}

// openSession is a session with cfg, closed when the test ends.
func openSession(t *testing.T, cfg dispatcherclient.Config) *dispatcherclient.Session {
	t.Helper()
	s, err := dispatcherclient.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// startFollowing starts s and returns its assignments.
func startFollowing(ctx context.Context, t *testing.T, s *dispatcherclient.Session) <-chan agent.Assignments {
	t.Helper()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Assignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func put(t *testing.T, st *store.Store, o legion.Object) {
	t.Helper()
	if o.GetKind() != legion.KindTask { // tasks are the planner's: admission refuses them
		if err := legion.Admit(o); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := st.Put(context.Background(), o, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func header(kind legion.Kind, ns, name string) legion.Header {
	return legion.Header{APIVersion: legion.APIVersion, Kind: kind, Metadata: legion.Metadata{Name: name, Namespace: ns}}
}

func task(name, node, secret string) *legion.Task {
	t := &legion.Task{Header: header(legion.KindTask, "web", name)}
	t.Spec.Node = node
	t.Spec.DesiredState = legion.TaskRunning
	c := legion.Container{Name: "app", Image: "example/app:1"}
	if secret != "" {
		c.Secrets = []legion.FileRef{{Name: secret}}
	}
	t.Spec.Pod.Containers = []legion.Container{c}
	return t
}

func secret(name, value string) *legion.Secret {
	s := &legion.Secret{Header: header(legion.KindSecret, "web", name)}
	s.Spec.Data = []byte(value)
	return s
}

type summary struct {
	Tasks  []string
	Values map[string]string
}

func summarize(as agent.Assignments) summary {
	s := summary{Values: map[string]string{}}
	for _, t := range as.Tasks {
		s.Tasks = append(s.Tasks, t.Metadata.Name+"@"+t.Spec.Node)
	}
	for k, v := range as.Values {
		s.Values[k] = string(v)
	}
	return s
}

// until reads sets until one matches want, failing after the deadline;
// intermediate sets are allowed (a newer set replaces an untaken one).
func until(t *testing.T, ch <-chan agent.Assignments, want summary) {
	t.Helper()
	untilSeen(t, ch, want, summarize)
}

// untilSeen reads sets until one seen as of says is want, failing after
// the deadline.
func untilSeen[S any](t *testing.T, ch <-chan agent.Assignments, want S, of func(agent.Assignments) S) {
	t.Helper()
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	var last S
	for {
		select {
		case as, ok := <-ch:
			if !ok {
				t.Fatal("assignments channel closed")
			}
			if last = of(as); cmp.Equal(want, last) {
				return
			}
		case <-deadline.C:
			t.Fatalf("no set as wanted within 15s (-want +last):\n%s", cmp.Diff(want, last))
		}
	}
}

func TestSessionRegistersFollowsAndReports(t *testing.T) {
	m := dispatchertest.Start(t)
	put(t, m.Store, secret("token", "s3cret"))
	put(t, m.Store, secret("theirs", "not-yours"))
	put(t, m.Store, task("a-1", "node-a", "token"))
	put(t, m.Store, task("b-1", "node-b", "theirs"))

	s := newSession(t, m.CA, "node-a", m.Addr)
	ctx := ctxT(t)
	registered := time.Now()
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.PodCIDR(); got != "10.200.0.0/24" {
		t.Errorf("pod CIDR %q, want the lowest free 10.200.0.0/24", got)
	}
	o, _, err := m.Store.Get(legion.KindNode, "", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	if st := o.(*legion.Node).Status; st.Hostname != "node-a" || st.Version != "test" || st.PodCIDR != "10.200.0.0/24" {
		t.Errorf("node-a status %+v: want the session's report and its subnet", st)
	}

	ch, err := s.Assignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	until(t, ch, summary{Tasks: []string{"a-1@node-a"}, Values: map[string]string{"Secret/web/token": "s3cret"}})
	put(t, m.Store, task("a-2", "node-a", ""))
	until(t, ch, summary{Tasks: []string{"a-1@node-a", "a-2@node-a"}, Values: map[string]string{"Secret/web/token": "s3cret"}})

	st := legion.TaskStatus{State: legion.TaskRunning, Message: "up", Ready: true}
	if err := s.Report(ctx, "web", "a-1", "", st); err != nil {
		t.Fatal(err)
	}
	o, _, err = m.Store.Get(legion.KindTask, "web", "a-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, o.(*legion.Task).Status); diff != "" {
		t.Errorf("a-1 status (-want +got):\n%s", diff)
	}
	if err := s.Report(ctx, "web", "b-1", "", st); status.Code(err) != codes.PermissionDenied || errors.Is(err, agent.ErrNoManager) {
		t.Errorf("reporting node-b's task: %v, want PermissionDenied, a refusal", err)
	}

	// Heartbeats carry the usage; registration alone does not.
	dispatchertest.Poll(t, "a heartbeat with usage", 10*time.Second, func() bool {
		return slices.ContainsFunc(m.Service.Usage(), func(u legion.Usage) bool {
			return u.Node == "node-a" && u.Task == "a-1" && u.CPU == 100
		})
	})
	if at := m.Service.Heartbeats()["node-a"]; at.Before(registered) {
		t.Errorf("node-a last heard %s, before the session started at %s", at, registered)
	}
}

// A status that changes after registration (a published port the node
// cannot serve) reaches the node's stored status when the session is told.
func TestSessionRegistersAChangedStatus(t *testing.T) {
	m := dispatchertest.Start(t)
	var mu sync.Mutex
	var problems []legion.PortError
	pressure := false
	cfg := sessionConfig(t, m.CA, "node-a", m.Addr)
	cfg.Status = func() legion.NodeStatus {
		mu.Lock()
		defer mu.Unlock()
		return legion.NodeStatus{Hostname: "node-a", Version: "test", PublishErrors: slices.Clone(problems), MemoryPressure: pressure}
	}
	s := openSession(t, cfg)
	if err := s.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	stored := func() []legion.PortError {
		o, _, err := m.Store.Get(legion.KindNode, "", "node-a")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Node).Status.PublishErrors
	}
	if got := stored(); got != nil {
		t.Fatalf("publish errors at registration: %v", got)
	}
	busy := []legion.PortError{{Port: 8080, Error: "listen tcp 127.0.0.1:8080: bind: address already in use"}}
	mu.Lock()
	problems = busy
	mu.Unlock()
	s.StatusChanged()
	dispatchertest.Poll(t, "the new status stored", 10*time.Second, func() bool { return cmp.Equal(stored(), busy) })
	mu.Lock()
	problems = nil
	mu.Unlock()
	s.StatusChanged()
	dispatchertest.Poll(t, "the port's problem cleared", 10*time.Second, func() bool { return stored() == nil })
	// Memory pressure, which the agent reports as it begins and ends.
	underPressure := func() bool {
		o, _, err := m.Store.Get(legion.KindNode, "", "node-a")
		return err == nil && o.(*legion.Node).Status.MemoryPressure
	}
	mu.Lock()
	pressure = true
	mu.Unlock()
	s.StatusChanged()
	dispatchertest.Poll(t, "the memory pressure stored", 10*time.Second, underPressure)
	mu.Lock()
	pressure = false
	mu.Unlock()
	s.StatusChanged()
	dispatchertest.Poll(t, "the memory pressure over", 10*time.Second, func() bool { return !underPressure() })
	if o, _, err := m.Store.Get(legion.KindNode, "", "node-a"); err != nil || o.(*legion.Node).Status.PodCIDR != "10.200.0.0/24" {
		t.Errorf("registering again changed the node's subnet: %v %v", o, err)
	}
}

func TestSessionFailsOverToALiveManager(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	// Two managers serving one replica, as two managers of a cluster
	// would after replication.
	l1, l2 := dispatchertest.Listen(t), dispatchertest.Listen(t)
	a1, a2 := l1.Addr().String(), l2.Addr().String()
	peers := func() (string, []string) { return a1, []string{a1, a2} }
	m1 := dispatchertest.Serve(t, ca, st, l1, peers)
	dispatchertest.Serve(t, ca, st, l2, peers)
	put(t, st, task("a-1", "node-a", ""))

	dead := dispatchertest.DeadAddr(t)
	s := newSession(t, ca, "node-a", dead, a1)
	ctx := ctxT(t)
	if err := s.Start(ctx); err != nil {
		t.Fatalf("start with a dead first manager: %v", err)
	}
	ch, err := s.Assignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The session learned the second manager from the heartbeat Start
	// sends at once: a node cut off from the manager it registered with
	// right after has the others to go to.
	if got := s.Managers(); !slices.Contains(got, a2) {
		t.Fatalf("managers %v right after Start: the cluster's other manager %s is not among them", got, a2)
	}
	until(t, ch, summary{Tasks: []string{"a-1@node-a"}, Values: map[string]string{}})
	if got := s.Managers(); got[0] != a1 || got[1] != a2 {
		t.Errorf("managers %v: want the cluster's list first", got)
	}

	m1.Stop() // the manager the stream and the writes use dies
	put(t, st, task("a-2", "node-a", ""))
	until(t, ch, summary{Tasks: []string{"a-1@node-a", "a-2@node-a"}, Values: map[string]string{}})
	want := legion.TaskStatus{State: legion.TaskRunning, Message: "after failover"}
	if err := s.Report(ctx, "web", "a-2", "", want); err != nil {
		t.Fatalf("report after the first manager died: %v", err)
	}
	o, _, err := st.Get(legion.KindTask, "web", "a-2")
	if err != nil {
		t.Fatal(err)
	}
	if got := o.(*legion.Task).Status; got.Message != want.Message {
		t.Errorf("a-2 status %+v, want %+v", got, want)
	}
}

// A write that every manager failed over (none answered) says that no
// manager took it, so the agent may ask again later; the managers' own
// answer stays in it.
func TestSessionSaysNoManagerTookAWrite(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	l := dispatchertest.Listen(t)
	a := l.Addr().String()
	dead := dispatchertest.DeadAddr(t)
	m := dispatchertest.Serve(t, ca, st, l, func() (string, []string) { return a, []string{a, dead} })
	put(t, st, task("a-1", "node-a", ""))
	s := newSession(t, ca, "node-a", a, dead)
	ctx := ctxT(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	err := s.Report(ctx, "web", "a-1", "", legion.TaskStatus{State: legion.TaskRunning})
	if !errors.Is(err, agent.ErrNoManager) || status.Code(err) != codes.Unavailable {
		t.Fatalf("a report with no manager up: %v, want agent.ErrNoManager around Unavailable", err)
	}
}

// LeaderCalls moves with each call a leader takes and not with one none
// took: the agent's workers read a report refused through an election as
// due again once it moves (agent.Resend).
func TestSessionCountsTheCallsALeaderTook(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	m := dispatchertest.Serve(t, ca, st, dispatchertest.Listen(t), nil)
	put(t, st, task("a-1", "node-a", ""))
	s := newSession(t, ca, "node-a", m.Addr)
	ctx := ctxT(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if n := s.LeaderCalls(); n == 0 {
		t.Fatal("the registration a leader took is not counted")
	}
	before := s.LeaderCalls()
	if err := s.Report(ctx, "web", "a-1", "", legion.TaskStatus{State: legion.TaskRunning}); err != nil {
		t.Fatal(err)
	}
	if after := s.LeaderCalls(); after <= before {
		t.Fatalf("a report taken left the count at %d", after)
	}
	m.Stop()
	before = s.LeaderCalls()
	if err := s.Report(ctx, "web", "a-1", "", legion.TaskStatus{State: legion.TaskRunning}); !errors.Is(err, agent.ErrNoManager) {
		t.Fatalf("a report with no manager up: %v, want agent.ErrNoManager", err)
	}
	if after := s.LeaderCalls(); after != before {
		t.Fatalf("a report no manager took moved the count from %d to %d", before, after)
	}
}

func TestSessionWritesGoToTheLeaderAFollowerNames(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	lst, fst := dispatchertest.OpenPair(t)
	ll, fl := dispatchertest.Listen(t), dispatchertest.Listen(t)
	la, fa := ll.Addr().String(), fl.Addr().String()
	peers := func() (string, []string) { return la, []string{la, fa} }
	dispatchertest.Serve(t, ca, lst, ll, peers)
	dispatchertest.Serve(t, ca, fst, fl, peers)

	// The follower refuses a write, naming the leader.
	conn, err := grpc.NewClient(fa, grpc.WithTransportCredentials(credentials.NewTLS(
		dispatchertest.Credentials(t, ca, "node-a", pki.RoleWorker).ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	data, _ := json.Marshal(legion.NodeStatus{})
	_, err = legionpb.NewDispatcherClient(conn).Register(ctxT(t), &legionpb.RegisterRequest{Status: data})
	stt, _ := status.FromError(err)
	var named string
	for _, d := range stt.Details() {
		if nl, ok := d.(*legionpb.NotLeader); ok {
			named = nl.GetLeader()
		}
	}
	if stt.Code() != codes.Unavailable || named != la {
		t.Fatalf("register on the follower: %v (leader named %q), want Unavailable naming %s", err, named, la)
	}

	// A session that knows only the follower registers through the
	// leader, and follows its assignments from the follower's replica.
	put(t, lst, task("a-1", "node-a", ""))
	s := newSession(t, ca, "node-a", fa)
	ctx := ctxT(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := lst.Get(legion.KindNode, "", "node-a"); err != nil {
		t.Fatalf("node-a not registered on the leader: %v", err)
	}
	ch, err := s.Assignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	until(t, ch, summary{Tasks: []string{"a-1@node-a"}, Values: map[string]string{}})
	if err := s.Report(ctx, "web", "a-1", "", legion.TaskStatus{State: legion.TaskRunning}); err != nil {
		t.Fatal(err)
	}
	o, _, err := lst.Get(legion.KindTask, "web", "a-1")
	if err != nil || o.(*legion.Task).Status.State != legion.TaskRunning {
		t.Fatalf("a-1 on the leader: %v %v, want running", o, err)
	}
}

func TestSessionForAnotherNodeIsRefused(t *testing.T) {
	m := dispatchertest.Start(t)
	s, err := dispatcherclient.New(dispatcherclient.Config{Node: "node-b", Managers: []string{m.Addr},
		TLS: dispatchertest.Credentials(t, m.CA, "node-a", pki.RoleWorker).ClientConfig()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Start(ctxT(t)); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node-a's certificate registering node-b: %v, want PermissionDenied", err)
	}
	select {
	case <-s.Removed():
		t.Fatalf("a refusal for another reason taken for the node's removal: %v", s.RemovedErr())
	default:
	}
}

// A node's connections keep gRPC's flow-control windows fixed: with its
// default ones, nearly every answer (a heartbeat's, a report's, an
// assignment message) made the node ping the manager, and the manager
// answer the ping.
func TestSessionSendsNoPings(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	var count grpcpings.Counter
	creds := count.Creds(credentials.NewTLS(dispatchertest.Credentials(t, ca, "m1", pki.RoleManager).ServerConfig()))
	m := dispatchertest.ServeWith(t, ca, dispatcher.Fixed(st), nil, dispatcher.Options{}, grpc.Creds(creds))
	put(t, st, task("a-1", "node-a", ""))
	s := newSession(t, ca, "node-a", m.Addr)
	ctx := ctxT(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if err := s.Report(ctx, "web", "a-1", "", legion.TaskStatus{State: legion.TaskRunning, Message: fmt.Sprint("report ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := count.Pings(); n != 0 {
		t.Errorf("the node sent %d pings over its registration, stream and twenty reports, want none", n)
	}
}
