package dispatcher_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/netbsd/addrplan"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/leakcheck"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testpoll"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// dial connects to the manager as the node the certificate names.
func dial(t testing.TB, m *dispatchertest.Manager, name string, role pki.Role) legionpb.DispatcherClient {
	t.Helper()
	return dialTLS(t, m.Addr, dispatchertest.Credentials(t, m.CA, name, role).ClientConfig())
}

func dialTLS(t testing.TB, addr string, cfg *tls.Config) legionpb.DispatcherClient {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return legionpb.NewDispatcherClient(c)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, st *store.Store, o legion.Object) legion.Object {
	t.Helper()
	if o.GetKind() == legion.KindTask {
		// Tasks are the planner's: admission refuses them from users.
	} else if err := legion.Admit(o); err != nil {
		t.Fatalf("admitting %s %s: %v", o.GetKind(), o.GetMetadata().Name, err)
	}
	got, _, err := st.Put(context.Background(), o, store.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func header(kind legion.Kind, ns, name string) legion.Header {
	return legion.Header{APIVersion: legion.APIVersion, Kind: kind, Metadata: legion.Metadata{Name: name, Namespace: ns}}
}

func secret(ns, name, value string) *legion.Secret {
	s := &legion.Secret{Header: header(legion.KindSecret, ns, name)}
	s.Spec.Data = []byte(value)
	return s
}

func config(ns, name, value string) *legion.Config {
	c := &legion.Config{Header: header(legion.KindConfig, ns, name)}
	c.Spec.Data = []byte(value)
	return c
}

// task makes a task on node using a secret as env, a config as a file and
// a pull secret.
func task(ns, name, node, envSecret, fileConfig, pullSecret string) *legion.Task {
	t := &legion.Task{Header: header(legion.KindTask, ns, name)}
	t.Spec.Node = node
	t.Spec.DesiredState = legion.TaskRunning
	c := legion.Container{Name: "app", Image: "example/app:1"}
	if envSecret != "" {
		c.Env = []legion.EnvVar{{Name: "TOKEN", Secret: envSecret}}
	}
	if fileConfig != "" {
		c.Configs = []legion.FileRef{{Name: fileConfig}}
	}
	t.Spec.Pod.Containers = []legion.Container{c}
	if pullSecret != "" {
		t.Spec.Pod.ImagePullSecrets = []string{pullSecret}
	}
	return t
}

func register(t *testing.T, c legionpb.DispatcherClient, st legion.NodeStatus) *legionpb.RegisterResponse {
	t.Helper()
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.Register(ctxT(t), &legionpb.RegisterRequest{Status: data})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func getNode(t *testing.T, st *store.Store, name string) *legion.Node {
	t.Helper()
	o, _, err := st.Get(legion.KindNode, "", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*legion.Node)
}

func reservations(t *testing.T, st *store.Store) map[string]int {
	t.Helper()
	o, _, err := st.Get(legion.KindConfig, legion.SystemNamespace, dispatcher.SubnetsConfig)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	if err := json.Unmarshal(o.(*legion.Config).Spec.Data, &got); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRegisterAllocatesLowestFreeSubnetAndKeepsIt(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	// A deleted node's reservation stays: index 0 is held, so the first
	// node to register takes 1, the next 2.
	put(t, m.Store, config(legion.SystemNamespace, dispatcher.SubnetsConfig, `{"gone":0}`))
	a := dial(t, m, "node-a", pki.RoleWorker)
	b := dial(t, m, "node-b", pki.RoleManager)

	rep := legion.NodeStatus{Hostname: "node-a", Addr: "192.0.2.10", Version: "0.1.0",
		Platform:  legion.Platform{OS: "freebsd", Arch: "amd64"},
		Resources: legion.NodeResources{Capacity: legion.ResourceRequests{CPU: 4000, Memory: 8 << 30}}}
	if got := register(t, a, rep).GetPodCidr(); got != "10.200.1.0/24" {
		t.Fatalf("node-a pod subnet = %s, want 10.200.1.0/24", got)
	}
	if got := register(t, b, legion.NodeStatus{Hostname: "node-b"}).GetPodCidr(); got != "10.200.2.0/24" {
		t.Fatalf("node-b pod subnet = %s, want 10.200.2.0/24", got)
	}

	// The operator drains node-a; registering again keeps the spec and
	// the subnet.
	n := getNode(t, m.Store, "node-a")
	if n.Spec.Role != legion.RoleWorker || getNode(t, m.Store, "node-b").Spec.Role != legion.RoleManager {
		t.Fatalf("roles: node-a %q node-b %q, want the certificates' worker and manager", n.Spec.Role, getNode(t, m.Store, "node-b").Spec.Role)
	}
	n.Spec.Availability = legion.AvailabilityDrain
	if _, _, err := m.Store.Put(context.Background(), n, store.WriteOptions{KeepStatus: true}); err != nil {
		t.Fatal(err)
	}
	rep.Version = "0.1.1"
	if got := register(t, a, rep).GetPodCidr(); got != "10.200.1.0/24" {
		t.Fatalf("node-a pod subnet after re-registration = %s, want 10.200.1.0/24", got)
	}
	n = getNode(t, m.Store, "node-a")
	want := rep
	want.State = legion.NodeUnknown // the planner decides it from heartbeats
	want.PodCIDR = "10.200.1.0/24"
	if diff := cmp.Diff(want, n.Status); diff != "" {
		t.Errorf("node-a status (-want +got):\n%s", diff)
	}
	if n.Spec.Availability != legion.AvailabilityDrain {
		t.Errorf("node-a availability = %q, want the operator's drain kept", n.Spec.Availability)
	}
	if diff := cmp.Diff(map[string]int{"gone": 0, "node-a": 1, "node-b": 2}, reservations(t, m.Store)); diff != "" {
		t.Errorf("reservations (-want +got):\n%s", diff)
	}
	// A node that gives no address is known by the one it calls from.
	if got := getNode(t, m.Store, "node-b").Status.Addr; got != "127.0.0.1" {
		t.Errorf("node-b addr = %q, want the caller's 127.0.0.1", got)
	}
	// Registration counts as being heard from.
	if _, ok := m.Service.Heartbeats()["node-b"]; !ok {
		t.Errorf("heartbeats %v: node-b missing after registration", m.Service.Heartbeats())
	}
}

// recv reads the next set within the test's deadline.
func recv(t *testing.T, s grpc.ServerStreamingClient[legionpb.AssignmentSet]) *legionpb.AssignmentSet {
	t.Helper()
	set, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	return set
}

type decodedSet struct {
	Tasks  []string // namespace/name@node
	Values map[string]string
}

func decodeSet(t *testing.T, set *legionpb.AssignmentSet) decodedSet {
	t.Helper()
	d := decodedSet{Values: map[string]string{}}
	for _, raw := range set.GetTasks() {
		o, err := legion.FromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		tk := o.(*legion.Task)
		d.Tasks = append(d.Tasks, tk.Metadata.Namespace+"/"+tk.Metadata.Name+"@"+tk.Spec.Node)
	}
	for k, v := range set.GetValues() {
		d.Values[k] = string(v)
	}
	return d
}

func TestAssignmentsCarryOnlyTheNodesTasksAndValues(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	for _, o := range []legion.Object{
		secret("web", "token", "s3cret"), config("web", "conf", "listen 80"), secret("web", "pull", "registry-pw"),
		secret("web", "other-token", "not-yours"), config("web", "other-conf", "not-yours-either"),
		task("web", "a-1", "node-a", "token", "conf", "pull"),
		task("web", "a-2", "node-a", "", "", ""),
		task("web", "b-1", "node-b", "other-token", "other-conf", ""),
		task("web", "unplaced", "", "token", "", ""),
	} {
		put(t, m.Store, o)
	}
	a := dial(t, m, "node-a", pki.RoleWorker)
	s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := decodedSet{Tasks: []string{"web/a-1@node-a", "web/a-2@node-a"}, Values: map[string]string{
		"Secret/web/token": "s3cret", "Config/web/conf": "listen 80", "Secret/web/pull": "registry-pw"}}
	got := decodeSet(t, recv(t, s))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("first set (-want +got):\n%s", diff)
	}
	if k := legion.Key(legion.KindSecret, "web", "token"); k != "Secret/web/token" {
		t.Fatalf("value keys are legion.Key: %s", k)
	}

	// A change to another node's task sends nothing; a change to a secret
	// the node uses sends a new set; so does a new task of the node.
	put(t, m.Store, task("web", "b-2", "node-b", "", "", ""))
	put(t, m.Store, secret("web", "token", "rotated"))
	want.Values["Secret/web/token"] = "rotated"
	if diff := cmp.Diff(want, decodeSet(t, recv(t, s))); diff != "" {
		t.Fatalf("after the secret changed (-want +got):\n%s", diff)
	}
	t3 := task("web", "a-3", "node-a", "", "conf", "")
	put(t, m.Store, t3)
	want.Tasks = append(want.Tasks, "web/a-3@node-a")
	if diff := cmp.Diff(want, decodeSet(t, recv(t, s))); diff != "" {
		t.Fatalf("after a new task (-want +got):\n%s", diff)
	}
	// A task's change reaches the stream with its new spec.
	o, _, err := m.Store.Get(legion.KindTask, "web", "a-3")
	if err != nil {
		t.Fatal(err)
	}
	changed := o.(*legion.Task)
	changed.Spec.DesiredState = legion.TaskShutdown
	if _, _, err := m.Store.Put(context.Background(), changed, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	set := recv(t, s)
	var last *legion.Task
	for _, raw := range set.GetTasks() {
		o, err := legion.FromJSON(raw)
		if err != nil {
			t.Fatal(err)
		}
		if tk := o.(*legion.Task); tk.Metadata.Name == "a-3" {
			last = tk
		}
	}
	if last == nil || last.Spec.DesiredState != legion.TaskShutdown {
		t.Fatalf("after the task changed: a-3 = %+v, want desired state shutdown", last)
	}
}

func TestAssignmentsOfAnotherNodeAreRefused(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	put(t, m.Store, task("web", "b-1", "node-b", "", "", ""))
	a := dial(t, m, "node-a", pki.RoleWorker)
	s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{Node: "node-b"})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node-a asking for node-b's assignments: %v, want PermissionDenied", err)
	}
	// An admin certificate is not a node's.
	admin := dial(t, m, "admin", pki.RoleAdmin)
	s, err = admin.Assignments(ctxT(t), &legionpb.AssignmentsRequest{Node: "node-b"})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an admin asking for node-b's assignments: %v, want PermissionDenied", err)
	}
	// A certificate of another CA does not get through the handshake.
	other := dispatchertest.NewCA(t)
	stranger := dialTLS(t, m.Addr, dispatchertest.Credentials(t, other, "node-b", pki.RoleWorker).ClientConfig())
	s, err = stranger.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	if err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("a certificate of another CA: %v, want a refusal", err)
	}
}

func TestReportWritesOwnTasksOnly(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	put(t, m.Store, task("web", "a-1", "node-a", "", "", ""))
	put(t, m.Store, task("web", "b-1", "node-b", "", "", ""))
	a := dial(t, m, "node-a", pki.RoleWorker)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	st := legion.TaskStatus{State: legion.TaskRunning, Message: "started", Timestamp: now, Ready: true, IP: "10.200.0.2", Started: &now}
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Report(ctxT(t), &legionpb.ReportRequest{Namespace: "web", Name: "a-1", Status: data}); err != nil {
		t.Fatal(err)
	}
	o, _, err := m.Store.Get(legion.KindTask, "web", "a-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, o.(*legion.Task).Status); diff != "" {
		t.Errorf("a-1 status (-want +got):\n%s", diff)
	}
	if o.(*legion.Task).Spec.Node != "node-a" {
		t.Errorf("a-1 spec changed: node %q", o.(*legion.Task).Spec.Node)
	}
	// The same report again writes nothing.
	last := m.Store.Raft().LastIndex()
	if _, err := a.Report(ctxT(t), &legionpb.ReportRequest{Namespace: "web", Name: "a-1", Status: data}); err != nil {
		t.Fatal(err)
	}
	if again, _, _ := m.Store.Get(legion.KindTask, "web", "a-1"); again.GetMetadata().Version != o.GetMetadata().Version ||
		m.Store.Raft().LastIndex() != last {
		t.Errorf("a repeated report wrote: version %d -> %d, last index %d -> %d", o.GetMetadata().Version,
			again.GetMetadata().Version, last, m.Store.Raft().LastIndex())
	}

	_, err = a.Report(ctxT(t), &legionpb.ReportRequest{Namespace: "web", Name: "b-1", Status: data})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node-a reporting node-b's task: %v, want PermissionDenied", err)
	}
	o, _, err = m.Store.Get(legion.KindTask, "web", "b-1")
	if err != nil {
		t.Fatal(err)
	}
	if o.(*legion.Task).Status.State != "" {
		t.Errorf("b-1 status written anyway: %+v", o.(*legion.Task).Status)
	}
	_, err = a.Report(ctxT(t), &legionpb.ReportRequest{Node: "node-b", Namespace: "web", Name: "b-1", Status: data})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("node-a reporting as node-b: %v, want PermissionDenied", err)
	}
	_, err = a.Report(ctxT(t), &legionpb.ReportRequest{Namespace: "web", Name: "missing", Status: data})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("a task that does not exist: %v, want NotFound", err)
	}

	// A report naming the task's uid is taken; one naming another (the
	// pod of a task deleted since, whose name a new task took) is
	// refused, and writes nothing over the new task's status.
	uid := o.GetMetadata().UID // b-1's
	stopped := legion.TaskStatus{State: legion.TaskShutdown, Message: "stopped", Timestamp: now}
	old, err := json.Marshal(stopped)
	if err != nil {
		t.Fatal(err)
	}
	cur, _, err := m.Store.Get(legion.KindTask, "web", "a-1")
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.Report(ctxT(t), &legionpb.ReportRequest{Namespace: "web", Name: "a-1", Uid: uid, Status: old})
	if status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "was deleted: the task of that name now is another") {
		t.Fatalf("a report for another uid: %v, want NotFound saying the task was replaced", err)
	}
	if after, _, _ := m.Store.Get(legion.KindTask, "web", "a-1"); after.(*legion.Task).Status.State != legion.TaskRunning {
		t.Errorf("a refused report wrote a-1's status: %+v", after.(*legion.Task).Status)
	}
	if _, err := a.Report(ctxT(t), &legionpb.ReportRequest{Namespace: "web", Name: "a-1", Uid: cur.GetMetadata().UID, Status: old}); err != nil {
		t.Fatalf("a report naming the task's own uid: %v", err)
	}
}

func TestHeartbeatsReachSignals(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	a := dial(t, m, "node-a", pki.RoleWorker)
	// Not registered yet: the agent is told to register.
	_, err := a.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("heartbeat before registration: %v, want NotFound", err)
	}
	register(t, a, legion.NodeStatus{Hostname: "node-a"})
	before := time.Now()
	r, err := a.Heartbeat(ctxT(t), &legionpb.HeartbeatRequest{Usage: []*legionpb.TaskUsage{
		{Namespace: "web", Task: "a-1", CpuMillis: 250, MemoryBytes: 64 << 20}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{m.Addr}, r.GetManagers()); diff != "" {
		t.Errorf("managers (-want +got):\n%s", diff)
	}
	if r.GetLeader() != m.Addr || r.GetPeriodMs() != 2000 {
		t.Errorf("reply leader %q period %d ms, want %s and 2000", r.GetLeader(), r.GetPeriodMs(), m.Addr)
	}
	at, ok := m.Service.Heartbeats()["node-a"]
	if !ok || at.Before(before) {
		t.Fatalf("heartbeats %v: want node-a at or after %s", m.Service.Heartbeats(), before)
	}
	us := m.Service.Usage()
	if len(us) != 1 || us[0].Node != "node-a" || us[0].Task != "a-1" || us[0].Namespace != "web" || us[0].CPU != 250 || us[0].Memory != 64<<20 {
		t.Fatalf("usage %+v, want node-a's web/a-1 at 250m and 64Mi", us)
	}
}

// The heartbeat stream answers each beat as Heartbeat would, and checks
// each: a node removed while its stream is open is refused on its next
// beat, on the same stream.
func TestHeartbeatStreamAnswersAndChecksEachBeat(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	a := dial(t, m, "node-a", pki.RoleWorker)
	beat := func(st legionpb.Dispatcher_HeartbeatStreamClient, cpu int64) (*legionpb.HeartbeatResponse, error) {
		t.Helper()
		req := &legionpb.HeartbeatRequest{Usage: []*legionpb.TaskUsage{{Namespace: "web", Task: "a-1", CpuMillis: cpu}}}
		if err := st.Send(req); err != nil && !errors.Is(err, io.EOF) {
			t.Fatalf("sending a beat: %v", err)
		}
		return st.Recv()
	}
	// Not registered yet: told to register, and the stream ends.
	early, err := a.HeartbeatStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := beat(early, 1); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "register first") {
		t.Fatalf("a beat before registration: %v, want NotFound asking to register", err)
	}
	register(t, a, legion.NodeStatus{Hostname: "node-a"})
	st, err := a.HeartbeatStream(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, cpu := range []int64{100, 200, 300} {
		before := time.Now()
		r, err := beat(st, cpu)
		if err != nil {
			t.Fatalf("beat at %dm: %v", cpu, err)
		}
		if r.GetLeader() != m.Addr || r.GetPeriodMs() != 2000 || !slices.Equal(r.GetManagers(), []string{m.Addr}) {
			t.Errorf("reply %+v, want leader and managers %s and a 2000 ms period", r, m.Addr)
		}
		if at := m.Service.Heartbeats()["node-a"]; at.Before(before) {
			t.Errorf("beat at %dm: node-a last heard %s, before the beat was sent at %s", cpu, at, before)
		}
		if us := m.Service.Usage(); len(us) != 1 || us[0].CPU != legion.CPU(cpu) {
			t.Errorf("usage after the beat at %dm: %+v", cpu, us)
		}
	}
	if err := dispatcher.RecordRemoval(ctxT(t), m.Store, "node-a", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	// The refusal comes once the manager's cache has taken the removal;
	// until then beats go on, on the same stream.
	testpoll.Until(t, "the removed node's refusal on its open stream", 5*time.Second, 10*time.Millisecond, func() bool {
		_, err := beat(st, 400)
		if _, removed := legionpb.NodeRemovedMessage(err); removed {
			return true
		}
		if err != nil {
			t.Fatalf("a beat on the open stream after the node's removal: %v, want the removed node's refusal", err)
		}
		return false
	})
}

func TestConcurrentRegistrationsTakeDistinctSubnets(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	// As many as a cluster coming back at once may register together:
	// none of them may run out of attempts.
	const nodes = 64
	got := make([]string, nodes)
	errs := make(chan error, nodes)
	for i := range nodes {
		c := dial(t, m, fmt.Sprintf("node-%d", i), pki.RoleWorker)
		go func() {
			r, err := c.Register(ctxT(t), &legionpb.RegisterRequest{})
			if err == nil {
				got[i] = r.GetPodCidr()
			}
			errs <- err
		}()
	}
	for range nodes {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	var want []string
	for i := range nodes {
		want = append(want, fmt.Sprintf("10.200.%d.0/24", i))
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("subnets (-want +got):\n%s", diff)
	}
	if r := reservations(t, m.Store); len(r) != nodes {
		t.Errorf("reservations %v: want one per node", r)
	}
}

func TestFullRangeTakesOverADeletedNodesSubnet(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	reserved := map[string]int{}
	errs := make(chan error, addrplan.MaxSubnets)
	for i := range addrplan.MaxSubnets {
		name := fmt.Sprintf("n%d", i)
		reserved[name] = i
		go func() {
			if i == 7 { // deleted: its reservation stays
				errs <- nil
				return
			}
			n := &legion.Node{Header: header(legion.KindNode, "", name)}
			if err := legion.Admit(n); err != nil {
				errs <- err
				return
			}
			_, _, err := m.Store.Put(context.Background(), n, store.WriteOptions{})
			errs <- err
		}()
	}
	for range addrplan.MaxSubnets {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	data, err := json.Marshal(reserved)
	if err != nil {
		t.Fatal(err)
	}
	put(t, m.Store, config(legion.SystemNamespace, dispatcher.SubnetsConfig, string(data)))

	if got := register(t, dial(t, m, "newcomer", pki.RoleWorker), legion.NodeStatus{}).GetPodCidr(); got != "10.200.7.0/24" {
		t.Fatalf("newcomer's subnet %s, want the deleted n7's 10.200.7.0/24", got)
	}
	r := reservations(t, m.Store)
	if _, held := r["n7"]; held || r["newcomer"] != 7 || len(r) != addrplan.MaxSubnets {
		t.Errorf("reservations: n7 held %v, newcomer %d, %d in all; want the reservation moved", held, r["newcomer"], len(r))
	}
	// With every subnet held by a live node, registration fails and says so.
	_, err = dial(t, m, "one-too-many", pki.RoleWorker).Register(ctxT(t), &legionpb.RegisterRequest{})
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "node subnets are held by live nodes") {
		t.Fatalf("the 258th node: %v, want the range exhausted", err)
	}
}

func TestNoManagerSendsTheAgentElsewhere(t *testing.T) {
	t.Parallel()
	ca := dispatchertest.NewCA(t)
	m := dispatchertest.ServeWith(t, ca, dispatcher.Fixed(nil), nil, dispatcher.Options{})
	c := dial(t, m, "node-a", pki.RoleWorker)
	if _, err := c.Register(ctxT(t), &legionpb.RegisterRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("register on a daemon that is no manager: %v, want Unavailable", err)
	}
	s, err := c.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("assignments on a daemon that is no manager: %v, want Unavailable", err)
	}
}

func TestFollowerCutOffFromTheLeaderEndsItsStreams(t *testing.T) {
	t.Parallel()
	ca := dispatchertest.NewCA(t)
	lst, fst := dispatchertest.OpenPair(t)
	put(t, lst, task("web", "a-1", "node-a", "", "", ""))
	dispatchertest.Poll(t, "replication", 10*time.Second, func() bool {
		_, _, err := fst.Get(legion.KindTask, "web", "a-1")
		return err == nil
	})
	f := dispatchertest.ServeWith(t, ca, dispatcher.Fixed(fst), nil, dispatcher.Options{Check: 100 * time.Millisecond})
	c := dial(t, f, "node-a", pki.RoleWorker)
	s, err := c.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := decodeSet(t, recv(t, s)); !cmp.Equal(got.Tasks, []string{"web/a-1@node-a"}) {
		t.Fatalf("from the follower: %v", got.Tasks)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := s.Recv()
		ended <- err
	}()
	// The leader goes away. A new stream is refused at once, so an agent
	// looking for a manager goes to another; the open one is kept for as
	// long as an election takes (nothing commits without a leader, and
	// ending it would cost the agent a whole set), then ends.
	if err := lst.Close(); err != nil {
		t.Fatal(err)
	}
	dispatchertest.Poll(t, "the follower without a leader", 10*time.Second, func() bool {
		l, _ := fst.Leader()
		return l == ""
	})
	s2, err := c.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err == nil {
		_, err = s2.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("new stream on a follower without a leader: %v, want Unavailable", err)
	}
	select {
	case err := <-ended:
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("stream on a follower without a leader: %v, want Unavailable", err)
		}
		// The check runs every 100 ms: allow one.
		if kept, bound := time.Since(fst.LastContact()), fst.ElectionBound(); kept < bound-200*time.Millisecond {
			t.Fatalf("the open stream ended %v after the leader was last heard, before an election could have ended (%v)", kept, bound)
		}
	case <-time.After(fst.ElectionBound() + 10*time.Second):
		t.Fatalf("the open stream still runs %v after the follower lost its leader", fst.ElectionBound()+10*time.Second)
	}
}

func peersOf(t *testing.T, set *legionpb.AssignmentSet) []endpoints.Peer {
	t.Helper()
	var ps []endpoints.Peer
	if err := json.Unmarshal(set.GetPeers(), &ps); err != nil {
		t.Fatalf("peers %q: %v", set.GetPeers(), err)
	}
	return ps
}

// Every node's set lists the mesh: the nodes with a pod subnet and a
// WireGuard key, reached at their address on the design's port. A node
// registering its key sends everyone a new set.
func TestAssignmentsCarryTheMeshPeers(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	a := dial(t, m, "node-a", pki.RoleWorker)
	b := dial(t, m, "node-b", pki.RoleWorker)
	register(t, a, legion.NodeStatus{Hostname: "node-a", Addr: "192.0.2.10", WireGuard: &legion.WireGuard{PublicKey: "KEY-A"}})
	register(t, b, legion.NodeStatus{Hostname: "node-b", Addr: "192.0.2.11"})
	s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := []endpoints.Peer{{Name: "node-a", PodCIDR: "10.200.0.0/24", PublicKey: "KEY-A", Endpoint: "192.0.2.10:51820"}}
	if diff := cmp.Diff(want, peersOf(t, recv(t, s))); diff != "" {
		t.Fatalf("peers before node-b has a key (-want +got):\n%s", diff)
	}
	register(t, b, legion.NodeStatus{Hostname: "node-b", Addr: "192.0.2.11", WireGuard: &legion.WireGuard{PublicKey: "KEY-B", Endpoint: "198.51.100.7:51900"}})
	want = append(want, endpoints.Peer{Name: "node-b", PodCIDR: "10.200.1.0/24", PublicKey: "KEY-B", Endpoint: "198.51.100.7:51900"})
	if diff := cmp.Diff(want, peersOf(t, recv(t, s))); diff != "" {
		t.Fatalf("peers after node-b registered its key (-want +got):\n%s", diff)
	}
}

// Every set carries the policy state; a new NetworkPolicy or isolation
// mode sends a new one.
func TestAssignmentsCarryThePolicyState(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	a := dial(t, m, "node-a", pki.RoleWorker)
	register(t, a, legion.NodeStatus{Hostname: "node-a"})
	s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	policiesOf := func(set *legionpb.AssignmentSet) endpoints.Policies {
		var p endpoints.Policies
		if err := json.Unmarshal(set.GetPolicies(), &p); err != nil {
			t.Fatalf("policies %q: %v", set.GetPolicies(), err)
		}
		return p
	}
	if p := policiesOf(recv(t, s)); len(p.Policies) != 0 || len(p.Isolation) != 0 {
		t.Fatalf("policies before any: %+v", p)
	}
	ns, _ := legion.New(legion.KindNamespace)
	ns.GetMetadata().Name = "vault"
	ns.(*legion.Namespace).Spec.Isolation = legion.IsolationLocked
	put(t, m.Store, ns)
	if p := policiesOf(recv(t, s)); p.Isolation["vault"] != legion.IsolationLocked {
		t.Fatalf("after a locked namespace: %+v", p)
	}
	np, _ := legion.New(legion.KindNetworkPolicy)
	np.GetMetadata().Namespace, np.GetMetadata().Name = "vault", "from-web"
	np.(*legion.NetworkPolicy).Spec.Ingress = []legion.IngressRule{{From: []legion.Peer{{Namespace: "web"}}}}
	put(t, m.Store, np)
	want := []endpoints.Policy{{Namespace: "vault", Name: "from-web", Spec: np.(*legion.NetworkPolicy).Spec}}
	if diff := cmp.Diff(want, policiesOf(recv(t, s)).Policies); diff != "" {
		t.Fatalf("after a policy (-want +got):\n%s", diff)
	}
}

// certPEM is a Secret's value that looks like a certificate and its key,
// as a Route's certificate must.
const certPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n"

// Every set carries the routes; a route's TLS Secret reaches the nodes
// only when it holds a certificate and a key, and once a node is
// labelled legion.ingress=true only labelled nodes get it.
func TestAssignmentsCarryRoutesAndTheirCertificates(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	a := dial(t, m, "node-a", pki.RoleWorker)
	register(t, a, legion.NodeStatus{Hostname: "node-a"})
	put(t, m.Store, secret("web", "tls", certPEM))
	put(t, m.Store, secret("web", "db-password", "hunter2"))
	for _, r := range []struct{ name, secret string }{{"site", "tls"}, {"sneaky", "db-password"}} {
		o, _ := legion.New(legion.KindRoute)
		o.GetMetadata().Namespace, o.GetMetadata().Name = "web", r.name
		o.(*legion.Route).Spec = legion.RouteSpec{Host: r.name + ".example", Path: "/", Service: "front", TLS: &legion.RouteTLS{Secret: r.secret}}
		put(t, m.Store, o)
	}
	s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	set := recv(t, s)
	var routes []endpoints.Route
	if err := json.Unmarshal(set.GetRoutes(), &routes); err != nil || len(routes) != 2 || routes[0].Name != "site" || routes[0].TLSSecret != "tls" {
		t.Fatalf("routes %+v (%v)", routes, err)
	}
	vals := decodeSet(t, set).Values
	if vals["Secret/web/tls"] != certPEM {
		t.Errorf("the route's certificate did not reach the node: %v", vals)
	}
	if _, ok := vals["Secret/web/db-password"]; ok {
		t.Error("a route named a Secret without a certificate and the node got it")
	}
	// Another node becomes the ingress node: this one loses the key.
	n, _ := legion.New(legion.KindNode)
	n.GetMetadata().Name = "node-b"
	n.GetMetadata().Labels = map[string]string{dispatcher.IngressLabel: "true"}
	put(t, m.Store, n)
	if _, ok := decodeSet(t, recv(t, s)).Values["Secret/web/tls"]; ok {
		t.Error("a node not labelled for ingress still gets the certificate once another node is")
	}
}

// A delta stream's values and volumes follow what its node's tasks use,
// worked out again when that changed, not whenever a task did: a value
// two tasks use stays while one of them does; a task that turns to a
// Config, mounts a Volume or moves to another node sends exactly that.
func TestDeltaValuesAndVolumesFollowWhatTheTasksUse(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	put(t, m.Store, secret("web", "token", "s3cret"))
	put(t, m.Store, config("web", "cfg", "k=v"))
	putVolume(t, m.Store, zfsVolume("web", "data"))
	put(t, m.Store, task("web", "a-1", "node-a", "", "", ""))
	put(t, m.Store, task("web", "a-2", "node-a", "token", "", ""))
	a := dial(t, m, "node-a", pki.RoleWorker)
	s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{Deltas: true})
	if err != nil {
		t.Fatal(err)
	}
	if first := decodeSet(t, recv(t, s)); !maps.Equal(first.Values, map[string]string{"Secret/web/token": "s3cret"}) {
		t.Fatalf("first set's values: %v, want a-2's Secret alone", first.Values)
	}
	// change is what a message changed: task keys put and removed, value
	// keys put and removed, volume keys put and removed.
	type change struct{ Tasks, TasksGone, Values, ValuesGone, Volumes, VolumesGone []string }
	step := func(what string, tk *legion.Task, want change) {
		t.Helper()
		put(t, m.Store, tk)
		d := recv(t, s)
		keys := func(it *legionpb.Items) []string { return slices.Sorted(maps.Keys(it.PutMap())) }
		got := change{keys(d.GetTaskChanges()), d.GetTaskChanges().GetRemoved(), keys(d.GetValueChanges()), d.GetValueChanges().GetRemoved(),
			keys(d.GetVolumeChanges()), d.GetVolumeChanges().GetRemoved()}
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%s: the message's changes (-want +got):\n%s", what, diff)
		}
	}
	step("a-1 uses the Secret too", task("web", "a-1", "node-a", "token", "", ""), change{Tasks: []string{"web\x00a-1"}})
	step("a-2 no longer uses it", task("web", "a-2", "node-a", "", "", ""), change{Tasks: []string{"web\x00a-2"}})
	step("a-1 turns to the Config", task("web", "a-1", "node-a", "", "cfg", ""),
		change{Tasks: []string{"web\x00a-1"}, Values: []string{"Config/web/cfg"}, ValuesGone: []string{"Secret/web/token"}})
	mounts := task("web", "a-1", "node-a", "", "cfg", "")
	mounts.Spec.Volumes = map[string]string{"files": "data"}
	step("a-1 mounts the Volume", mounts, change{Tasks: []string{"web\x00a-1"}, Volumes: []string{"web\x00data"}})
	moved := task("web", "a-1", "node-b", "", "cfg", "")
	moved.Spec.Volumes = mounts.Spec.Volumes
	step("a-1 moves to node-b", moved,
		change{TasksGone: []string{"web\x00a-1"}, ValuesGone: []string{"Config/web/cfg"}, VolumesGone: []string{"web\x00data"}})
}

// A delta stream's route certificates follow the Routes and the nodes,
// not the routes' backends: a new backend sends no value; a Route that
// turns to another certificate sends it and drops the old; another node
// labelled for ingress takes them from this one.
func TestDeltaRouteCertificatesFollowRoutesAndNodes(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	put(t, m.Store, secret("web", "tls", certPEM))
	put(t, m.Store, secret("web", "tls2", certPEM))
	route := func(cert string) legion.Object {
		o, _ := legion.New(legion.KindRoute)
		o.GetMetadata().Namespace, o.GetMetadata().Name = "web", "site"
		o.(*legion.Route).Spec = legion.RouteSpec{Host: "site.example", Path: "/", Service: "front", TLS: &legion.RouteTLS{Secret: cert}}
		return o
	}
	put(t, m.Store, route("tls"))
	a := dial(t, m, "node-a", pki.RoleWorker)
	s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{Deltas: true})
	if err != nil {
		t.Fatal(err)
	}
	if first := decodeSet(t, recv(t, s)); first.Values["Secret/web/tls"] != certPEM || len(first.Values) != 1 {
		t.Fatalf("first set's values: %v, want the route's certificate alone", first.Values)
	}
	values := func(what string, want, gone []string) {
		t.Helper()
		d := recv(t, s)
		got := [][]string{slices.Sorted(maps.Keys(d.GetValueChanges().PutMap())), d.GetValueChanges().GetRemoved()}
		if diff := cmp.Diff([][]string{want, gone}, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%s: values put and removed (-want +got):\n%s", what, diff)
		}
	}
	// A ready task of the route's service: a new backend for the route.
	backend := task("web", "front-1-1", "node-b", "", "", "")
	backend.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: "front"}
	backend.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: "10.200.0.7"}
	put(t, m.Store, backend)
	values("a new backend", nil, nil)
	put(t, m.Store, route("tls2"))
	values("the route turns to another certificate", []string{"Secret/web/tls2"}, []string{"Secret/web/tls"})
	n, _ := legion.New(legion.KindNode)
	n.GetMetadata().Name = "node-b"
	n.GetMetadata().Labels = map[string]string{dispatcher.IngressLabel: "true"}
	put(t, m.Store, n)
	values("node-b is labelled for ingress", nil, []string{"Secret/web/tls2"})
}

// A stream that asks for deltas gets a whole set first, then only what
// changed: nothing for another node's task, the changed value alone, the
// removed task and its value by key; a new stream starts whole again.
func TestDeltaStreamsCarryOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	for _, o := range []legion.Object{secret("web", "token", "s3cret"), task("web", "a-1", "node-a", "token", "", ""),
		task("web", "a-2", "node-a", "", "", ""), task("web", "b-1", "node-b", "", "", "")} {
		put(t, m.Store, o)
	}
	a := dial(t, m, "node-a", pki.RoleWorker)
	open := func() grpc.ServerStreamingClient[legionpb.AssignmentSet] {
		s, err := a.Assignments(ctxT(t), &legionpb.AssignmentsRequest{Deltas: true})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	if first := recv(t, s); first.GetDelta() || len(first.GetTasks()) != 2 {
		t.Fatalf("first message: delta %v, %d tasks; want the whole set of 2", first.GetDelta(), len(first.GetTasks()))
	}
	put(t, m.Store, task("web", "b-2", "node-b", "", "", ""))
	put(t, m.Store, secret("web", "token", "rotated"))
	d := recv(t, s)
	if !d.GetDelta() || d.GetTaskChanges() != nil || string(d.GetValueChanges().PutMap()["Secret/web/token"]) != "rotated" ||
		len(d.GetValueChanges().GetPut()) != 1 || len(d.GetTasks()) != 0 {
		t.Fatalf("after another node's task and a secret: %v, want the secret's new value alone", d)
	}
	if _, err := m.Store.Delete(context.Background(), legion.KindTask, "web", "a-1", store.Precondition{}); err != nil {
		t.Fatal(err)
	}
	d = recv(t, s)
	if !d.GetDelta() || !slices.Equal(d.GetTaskChanges().GetRemoved(), []string{"web\x00a-1"}) || len(d.GetTaskChanges().GetPut()) != 0 ||
		!slices.Equal(d.GetValueChanges().GetRemoved(), []string{"Secret/web/token"}) {
		t.Fatalf("after a-1's removal: %v, want a-1 and its secret removed", d)
	}
	if again := recv(t, open()); again.GetDelta() || len(again.GetTasks()) != 1 {
		t.Fatalf("a new stream: delta %v, %d tasks; want the whole set of 1", again.GetDelta(), len(again.GetTasks()))
	}
}
