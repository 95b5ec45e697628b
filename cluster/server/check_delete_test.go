package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
)

// CheckDelete refuses what Delete refuses, with the same code and
// message, answers for the rest with the object as the delete would
// leave it (a running task told to stop), and changes nothing.
func TestCheckDeleteRefusesAsDeleteAndChangesNothing(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	ctx := context.Background()
	applyOK(t, c, `apiVersion: legion/v1
kind: Config
metadata: {name: settings, namespace: shop}
spec: {text: "color: blue"}
---
apiVersion: legion/v1
kind: Config
metadata: {name: spare, namespace: shop}
spec: {text: "unused"}
---
apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: web:1, env: [{name: COLOR, config: settings}]}]}
`)
	st := m.s.Store()
	// A task placed on a node and running, as the planner and its node
	// would have written it.
	o, _ := legion.New(legion.KindTask)
	task := o.(*legion.Task)
	task.Metadata.Name, task.Metadata.Namespace = "web-1-1", "shop"
	task.Spec.Node, task.Spec.DesiredState = "n1", legion.TaskRunning
	placed := time.Now()
	task.Spec.Placed = &placed
	task.Status.State = legion.TaskRunning
	if _, _, err := st.Put(ctx, task, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The only voting manager's Node.
	conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(credentials.NewTLS(m.s.Credentials().ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	nodeStatus, _ := json.Marshal(legion.NodeStatus{Addr: "127.0.0.1"})
	if _, err := pb.NewDispatcherClient(conn).Register(ctx, &pb.RegisterRequest{Status: nodeStatus}); err != nil {
		t.Fatal(err)
	}
	self := m.s.NodeID()

	versions := func() map[string]uint64 {
		t.Helper()
		out := map[string]uint64{}
		for _, k := range []struct {
			kind     legion.Kind
			ns, name string
		}{{legion.KindConfig, "shop", "settings"}, {legion.KindConfig, "shop", "spare"}, {legion.KindTask, "shop", "web-1-1"}, {legion.KindNode, "", self}} {
			o, _, err := st.Get(k.kind, k.ns, k.name)
			if err != nil {
				t.Fatalf("%s %s: %v", k.kind, k.name, err)
			}
			out[string(k.kind)+"/"+k.name] = o.GetMetadata().Version
		}
		return out
	}
	before := versions()
	stale := before["Config/spare"] - 1
	for _, tc := range []struct {
		what     string
		kind     legion.Kind
		ns, name string
		version  *uint64
		code     codes.Code
		want     string
	}{
		{"a Config a Service uses", legion.KindConfig, "shop", "settings", nil, codes.FailedPrecondition, "in use by"},
		{"an object not there", legion.KindConfig, "shop", "absent", nil, codes.NotFound, "not found"},
		{"an object at another version", legion.KindConfig, "shop", "spare", &stale, codes.Aborted, "expected version"},
		{"the only voting manager's Node", legion.KindNode, "", self, nil, codes.FailedPrecondition, "only voting manager"},
	} {
		_, checkErr := c.CheckDelete(ctx, tc.kind, tc.ns, tc.name, tc.version, nil)
		if client.Code(checkErr) != tc.code || !strings.Contains(checkErr.Error(), tc.want) {
			t.Errorf("check of the delete of %s: %v, want %s saying %q", tc.what, checkErr, tc.code, tc.want)
		}
		_, delErr := c.Delete(ctx, tc.kind, tc.ns, tc.name, tc.version)
		if checkErr == nil || delErr == nil || checkErr.Error() != delErr.Error() {
			t.Errorf("the delete of %s: %v; its check said %v: want the same refusal", tc.what, delErr, checkErr)
		}
	}

	got, err := c.CheckDelete(ctx, legion.KindConfig, "shop", "spare", nil, nil)
	if err != nil || got.GetMetadata().Name != "spare" {
		t.Fatalf("check of the delete of an unused Config: %v, %v", got, err)
	}
	got, err = c.CheckDelete(ctx, legion.KindTask, "shop", "web-1-1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gt := got.(*legion.Task); gt.Spec.DesiredState != legion.TaskShutdown || gt.Spec.StopReason != taskDeleted {
		t.Errorf("check of the delete of a running task: desired %s, stop reason %q; want it told to stop, as the delete does", gt.Spec.DesiredState, gt.Spec.StopReason)
	}
	// After a delete of web in the same dry run, nothing uses settings;
	// and an object a delete before took out is not there to delete.
	web, _, err := st.Get(legion.KindService, "shop", "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckDelete(ctx, legion.KindConfig, "shop", "settings", nil, []legion.Object{web}); err != nil {
		t.Errorf("check of the delete of settings after web's: %v, want it free", err)
	}
	spare, _, err := st.Get(legion.KindConfig, "shop", "spare")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CheckDelete(ctx, legion.KindConfig, "shop", "spare", nil, []legion.Object{spare}); client.Code(err) != codes.NotFound {
		t.Errorf("check of a second delete of spare: %v, want NOT_FOUND", err)
	}
	after := versions()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s went from version %d to %d: a check changed it", k, v, after[k])
		}
	}
	if _, err := c.Delete(ctx, legion.KindConfig, "shop", "spare", nil); err != nil {
		t.Fatalf("the delete after its check: %v", err)
	}
	if _, _, err := st.Get(legion.KindConfig, "shop", "spare"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the Config after its delete: %v, want it gone", err)
	}
}
