package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/audit"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// The roles of the table, as 9 names them.
const (
	rAdmin   = "cluster admin"
	rManager = "manager"
	rWorker  = "worker node"
	rView    = "user view in shop"
	rEdit    = "user edit in shop"
	rNSAdmin = "user admin in shop"
	rOther   = "user of another namespace"
	rNone    = "no certificate"
)

var allRoles = []string{rAdmin, rManager, rWorker, rView, rEdit, rNSAdmin, rOther, rNone}

// verdict is what a role gets from a method.
type verdict int

const (
	deny  verdict = iota // PERMISSION_DENIED or UNAUTHENTICATED: refused for rights
	allow                // past every rights check (the call may fail later, on its request)
	// state: refused for everyone because the daemon already belongs to a
	// cluster (FAILED_PRECONDITION), whatever the caller's rights.
	state
)

func (v verdict) String() string {
	return [...]string{"refused", "allowed", "refused for the daemon's state"}[v]
}

// only allows the roles named, refusing the rest.
func only(roles ...string) map[string]verdict {
	out := map[string]verdict{}
	for _, r := range allRoles {
		out[r] = deny
	}
	for _, r := range roles {
		out[r] = allow
	}
	return out
}

func every(v verdict) map[string]verdict {
	out := map[string]verdict{}
	for _, r := range allRoles {
		out[r] = v
	}
	return out
}

// rightsTable is every method of every service on a manager's port. The
// cluster admin and managers keep every right, but Raft, Promote and
// RecordAudit are for managers, and the dispatcher and agents' sessions
// serve nodes. Users act only in namespaces their RoleBindings name: view
// reads (not Secrets), edit also writes and opens exec, port-forward and
// volume data, admin also RoleBindings.
var rightsTable = map[string]map[string]verdict{
	"/legion.v1.Objects/Apply":      only(rAdmin, rManager, rEdit, rNSAdmin),
	"/legion.v1.Objects/Get":        only(rAdmin, rManager, rView, rEdit, rNSAdmin),
	"/legion.v1.Objects/List":       only(rAdmin, rManager, rView, rEdit, rNSAdmin),
	"/legion.v1.Objects/ListStream": only(rAdmin, rManager, rView, rEdit, rNSAdmin),
	"/legion.v1.Objects/Delete":     only(rAdmin, rManager, rEdit, rNSAdmin),
	// A dry run of a delete needs the rights of the delete.
	"/legion.v1.Objects/CheckDelete": only(rAdmin, rManager, rEdit, rNSAdmin),
	"/legion.v1.Objects/Watch":       only(rAdmin, rManager, rView, rEdit, rNSAdmin),

	// Init and join are for a fresh daemon, from its own host: a member
	// tells everyone it is one.
	"/legion.v1.Cluster/Init":        every(state),
	"/legion.v1.Cluster/JoinCluster": every(state),
	"/legion.v1.Cluster/Status":      only(rAdmin, rManager),
	// The join token is the right: anyone may present one (this one is
	// empty, so the call fails on its request).
	"/legion.v1.Cluster/Join":        every(allow),
	"/legion.v1.Cluster/Promote":     only(rManager),
	"/legion.v1.Cluster/SetVoter":    only(rAdmin, rManager),
	"/legion.v1.Cluster/TokenShow":   only(rAdmin, rManager),
	"/legion.v1.Cluster/TokenRotate": only(rAdmin, rManager),
	"/legion.v1.Cluster/IssueUser":   only(rAdmin, rManager),
	"/legion.v1.Cluster/Backup":      only(rAdmin, rManager),
	"/legion.v1.Cluster/Autolock":    only(rAdmin, rManager),
	// Unlock is taken without credentials from the manager's own host,
	// which every caller here is.
	"/legion.v1.Cluster/Unlock":      every(allow),
	"/legion.v1.Cluster/RecordAudit": only(rManager),
	"/legion.v1.Cluster/Audit":       only(rAdmin, rManager),
	"/legion.v1.Cluster/RevokeUser":  only(rAdmin, rManager),
	"/legion.v1.Cluster/RotateCA":    only(rAdmin, rManager),
	"/legion.v1.Cluster/Usage":       only(rAdmin, rManager, rView, rEdit, rNSAdmin),
	"/legion.v1.Cluster/Events":      only(rAdmin, rManager, rView, rEdit, rNSAdmin),

	"/legion.v1.Raft/AppendEntries":         only(rManager),
	"/legion.v1.Raft/AppendEntriesPipeline": only(rManager),
	"/legion.v1.Raft/RequestVote":           only(rManager),
	"/legion.v1.Raft/RequestPreVote":        only(rManager),
	"/legion.v1.Raft/TimeoutNow":            only(rManager),
	"/legion.v1.Raft/InstallSnapshot":       only(rManager),

	"/legion.v1.Dispatcher/Register":        only(rManager, rWorker),
	"/legion.v1.Dispatcher/Heartbeat":       only(rManager, rWorker),
	"/legion.v1.Dispatcher/HeartbeatStream": only(rManager, rWorker),
	"/legion.v1.Dispatcher/Assignments":     only(rManager, rWorker),
	"/legion.v1.Dispatcher/Report":          only(rManager, rWorker),
	"/legion.v1.Dispatcher/Renew":           only(rManager, rWorker),
	"/legion.v1.Dispatcher/ClaimVolume":     only(rManager, rWorker),

	"/legion.v1.Sessions/Sessions": only(rManager, rWorker),
	"/legion.v1.Sessions/Attach":   only(rManager, rWorker),

	"/legion.v1.Pods/Logs":        only(rAdmin, rManager, rView, rEdit, rNSAdmin),
	"/legion.v1.Pods/Exec":        only(rAdmin, rManager, rEdit, rNSAdmin),
	"/legion.v1.Pods/PortForward": only(rAdmin, rManager, rEdit, rNSAdmin),

	"/legion.v1.Volumes/Backup":  only(rAdmin, rManager, rEdit, rNSAdmin),
	"/legion.v1.Volumes/Restore": only(rAdmin, rManager, rEdit, rNSAdmin),
}

// portMethods lists every method of the services defined for the port,
// from the generated descriptors.
func portMethods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	for _, f := range []protoreflect.FileDescriptor{pb.File_legion_proto, pb.File_pods_proto, pb.File_dispatcher_proto} {
		for i := range f.Services().Len() {
			s := f.Services().Get(i)
			for j := range s.Methods().Len() {
				out = append(out, s.Methods().Get(j))
			}
		}
	}
	return out
}

func fullMethod(m protoreflect.MethodDescriptor) string {
	return "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
}

// requests gives a method a request aimed at namespace shop; a method
// not named gets an empty one.
func requests(task, managerName string) map[string]proto.Message {
	target := &pb.Target{Namespace: "shop", Kind: "Task", Name: task}
	c, _ := legion.New(legion.KindConfig)
	c.GetMetadata().Namespace, c.GetMetadata().Name = "shop", "table"
	c.(*legion.Config).Spec.Data = []byte("x")
	cfg, _ := pb.ToProto(c)
	header, _ := json.Marshal(legion.VolumeBackupHeader{Format: legion.VolumeBackupFormat, Namespace: "shop", Name: "v1",
		Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 20}, Node: "nowhere", Backend: "zfs", Time: time.Now()})
	return map[string]proto.Message{
		"/legion.v1.Objects/Apply":       &pb.ApplyRequest{Items: []*pb.ApplyItem{{Object: cfg}}, DryRun: true},
		"/legion.v1.Objects/Get":         &pb.GetRequest{Kind: "Config", Namespace: "shop", Name: "c1"},
		"/legion.v1.Objects/List":        &pb.ListRequest{Kind: "Config", Namespace: "shop"},
		"/legion.v1.Objects/ListStream":  &pb.ListRequest{Kind: "Config", Namespace: "shop"},
		"/legion.v1.Objects/Delete":      &pb.DeleteRequest{Kind: "Config", Namespace: "shop", Name: "absent"},
		"/legion.v1.Objects/CheckDelete": &pb.DeleteRequest{Kind: "Config", Namespace: "shop", Name: "absent"},
		"/legion.v1.Objects/Watch":       &pb.WatchRequest{Kind: "Config", Namespace: "shop"},
		"/legion.v1.Cluster/Promote":     &pb.PromoteRequest{NodeId: managerName},
		"/legion.v1.Cluster/Usage":       &pb.UsageRequest{Namespace: "shop"},
		"/legion.v1.Cluster/Events":      &pb.EventsRequest{Namespace: "shop"},
		"/legion.v1.Pods/Logs":           &pb.LogsRequest{Target: target},
		"/legion.v1.Pods/Exec":           &pb.ExecInput{Start: &pb.ExecStart{Target: target, Command: []string{"true"}}},
		"/legion.v1.Pods/PortForward":    &pb.PortForwardInput{Target: target, Port: 80},
		"/legion.v1.Volumes/Backup":      &pb.VolumeBackupRequest{Namespace: "shop", Name: "absent"},
		"/legion.v1.Volumes/Restore":     &pb.VolumeChunk{Header: header},
	}
}

// call makes one call as a role and returns its status code and message:
// a stream that is still open when the deadline comes got past every
// check.
func call(ctx context.Context, conn *grpc.ClientConn, m protoreflect.MethodDescriptor, req proto.Message) (codes.Code, string) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	outType, err := protoregistry.GlobalTypes.FindMessageByName(m.Output().FullName())
	if err != nil {
		return codes.Internal, err.Error()
	}
	out := outType.New().Interface()
	if !m.IsStreamingClient() && !m.IsStreamingServer() {
		err = conn.Invoke(ctx, fullMethod(m), req, out)
		return status.Code(err), status.Convert(err).Message()
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: m.IsStreamingServer(), ClientStreams: m.IsStreamingClient()}, fullMethod(m))
	if err == nil {
		err = s.SendMsg(req)
	}
	if err == nil {
		err = s.CloseSend()
	}
	// io.EOF from SendMsg: the manager ended the stream first (a refusal
	// can come before the message goes out); its status comes with RecvMsg.
	if err == nil || errors.Is(err, io.EOF) {
		err = s.RecvMsg(out)
	}
	return status.Code(err), status.Convert(err).Message()
}

// userCreds has the cluster issue a user certificate.
func userCreds(t *testing.T, admin *client.Client, name string) *pki.Credentials {
	t.Helper()
	key, csr := dispatchertest.NewCSR(t, name)
	cert, ca, err := admin.IssueUser(context.Background(), name, csr)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := pki.KeyPEM(key)
	creds, err := pki.NewCredentials(cert, keyPEM, ca)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func binding(ns, user string, role legion.Role) legion.Object {
	b, _ := legion.New(legion.KindRoleBinding)
	b.GetMetadata().Name, b.GetMetadata().Namespace = user, ns
	b.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: user, Role: role}
	return b
}

func namespace(name string) legion.Object {
	n, _ := legion.New(legion.KindNamespace)
	n.GetMetadata().Name = name
	return n
}

// Every method of the port, called by every role: allowed or refused as 9
// says, and every refusal is an audit event naming who was refused and
// why.
func TestEveryMethodByEveryRole(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 1, Workers: 1})
	mgr := c.Managers[0]
	admin := c.Client()
	ctx := context.Background()

	// A method without a row fails: the table covers the whole port.
	methods := portMethods()
	for _, m := range methods {
		if _, ok := rightsTable[fullMethod(m)]; !ok {
			t.Errorf("%s: no row in the rights table", fullMethod(m))
		}
	}
	if len(rightsTable) != len(methods) {
		t.Errorf("the table has %d rows for %d methods", len(rightsTable), len(methods))
	}

	if _, err := admin.Apply(ctx, []legion.Object{namespace("shop"), namespace("lab")}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	users := map[string]string{rView: "vera", rEdit: "ed", rNSAdmin: "ada", rOther: "olga"}
	if _, err := admin.Apply(ctx, []legion.Object{binding("shop", "vera", legion.RoleView), binding("shop", "ed", legion.RoleEdit),
		binding("shop", "ada", legion.RoleAdmin), binding("lab", "olga", legion.RoleAdmin)}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	// A task on a node, so sessions reach their rights check.
	task, _ := legion.New(legion.KindTask)
	task.GetMetadata().Namespace, task.GetMetadata().Name = "shop", "web-1"
	task.(*legion.Task).Spec = legion.TaskSpec{Node: "nowhere", DesiredState: legion.TaskRunning,
		Pod: legion.PodSpec{Containers: []legion.Container{{Name: "app", Image: "example/app:1"}}}}
	if _, _, err := mgr.Store().Put(ctx, task, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}

	adminCreds, err := pki.LoadBundle(c.AdminFile())
	if err != nil {
		t.Fatal(err)
	}
	noCert := adminCreds.ClientConfig()
	noCert.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tls.Certificate{}, nil }
	managerCreds := mgr.Server.Credentials()
	tlsOf := map[string]*tls.Config{
		rAdmin: adminCreds.ClientConfig(), rManager: managerCreds.ClientConfig(),
		rWorker: c.Workers[0].Server.Credentials().ClientConfig(), rNone: noCert,
	}
	actor := map[string]string{rAdmin: pki.IdentityOf(adminCreds.Cert.Leaf).Name, rManager: pki.IdentityOf(managerCreds.Cert.Leaf).Name,
		rWorker: pki.IdentityOf(c.Workers[0].Server.Credentials().Cert.Leaf).Name, rNone: ""}
	for role, name := range users {
		tlsOf[role] = userCreds(t, admin, name).ClientConfig()
		actor[role] = name
	}
	reqs := requests("web-1", actor[rManager])

	type outcome struct {
		code codes.Code
		msg  string
	}
	var mu sync.Mutex
	got := map[[2]string]outcome{}
	var wg sync.WaitGroup
	for _, role := range allRoles {
		conn, err := grpc.NewClient(mgr.Addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsOf[role])))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		for _, m := range methods {
			req := reqs[fullMethod(m)]
			if req == nil {
				in, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
				if err != nil {
					t.Fatal(err)
				}
				req = in.New().Interface()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, msg := call(ctx, conn, m, req)
				mu.Lock()
				got[[2]string{fullMethod(m), role}] = outcome{code, msg}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()

	// The refusals, as (actor, message) with how many calls got each.
	refusals := map[[2]string]int{}
	for _, m := range methods {
		for _, role := range allRoles {
			method := fullMethod(m)
			o := got[[2]string{method, role}]
			var v verdict
			switch o.code {
			case codes.PermissionDenied, codes.Unauthenticated:
				v = deny
				refusals[[2]string{actor[role], o.msg}]++
			case codes.FailedPrecondition:
				v = allow
				if strings.Contains(o.msg, "already a manager") {
					v = state
				}
			default:
				v = allow
			}
			if want := rightsTable[method][role]; v != want {
				t.Errorf("%s by %s: %s (%s: %s), want %s", method, role, v, o.code, o.msg, want)
			}
		}
	}

	// Every refusal is an audit event of the refused caller, with the
	// refusal's message and the manager that decided.
	f := &audit.Flusher{Recorder: mgr.Server.AuditRecorder(), Store: mgr.Server.AuditStore, Hand: mgr.Server.HandAudit}
	if err := f.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	events, err := admin.Audit(ctx, client.AuditFilter{Denied: true})
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[[2]string]int{}
	for _, e := range events {
		if e.Outcome != string(audit.Denied) || e.Action == "" || e.Manager != mgr.Server.NodeID() {
			t.Errorf("refusal event %+v: want outcome denied, an action and manager %s", e, mgr.Server.NodeID())
		}
		recorded[[2]string{e.Actor, e.Message}]++
	}
	for k, n := range refusals {
		if recorded[k] < n {
			t.Errorf("%d refusals of %q saying %q, %d audit events", n, k[0], k[1], recorded[k])
		}
	}
	if len(refusals) == 0 {
		t.Fatal("no call was refused")
	}
	t.Logf("%d calls, %d refusals audited", len(got), len(events))
}
