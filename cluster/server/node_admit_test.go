package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/codes"
)

// A Node's role is how it joined: a change of spec.role, which nothing
// would act on, is refused saying how a node changes role, while its
// other fields still change.
func TestANodesRoleIsNotChangedByItsSpec(t *testing.T) {
	t.Parallel()
	m, _, w, admin := twoManagersAndAWorker(t)
	ctx := context.Background()
	var node *legion.Node
	waitFor(t, "the worker's Node", 10*time.Second, func() bool {
		o, _, err := m.s.store().Get(legion.KindNode, "", w.s.NodeID())
		if err == nil {
			node = o.(*legion.Node)
		}
		return err == nil
	})
	changed := *node
	changed.Spec.Role = legion.RoleManager
	_, err := admin.ApplyOne(ctx, &changed, client.ApplyOptions{})
	if client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "spec.role: manager: a node's role is the one it joined with (worker)") ||
		!strings.Contains(err.Error(), "manager token") {
		t.Fatalf("a worker's Node applied as a manager's: %v, want FAILED_PRECONDITION naming spec.role", err)
	}
	o, _, err := m.s.store().Get(legion.KindNode, "", w.s.NodeID())
	if err != nil || o.(*legion.Node).Spec.Role != legion.RoleWorker {
		t.Fatalf("the worker's Node after the refusal: %+v %v", o, err)
	}
	if err := registerAs(t, m.addr, m.s.Credentials()); err != nil {
		t.Fatal(err)
	}
	self, _, err := m.s.store().Get(legion.KindNode, "", m.s.NodeID())
	if err != nil {
		t.Fatal(err)
	}
	demoted := *self.(*legion.Node)
	demoted.Spec.Role = legion.RoleWorker
	if _, err := admin.ApplyOne(ctx, &demoted, client.ApplyOptions{}); client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "legion node demote") {
		t.Fatalf("a manager's Node applied as a worker's: %v, want FAILED_PRECONDITION naming demote", err)
	}
	paused := *node
	paused.Spec.Availability = legion.AvailabilityPause
	if _, err := admin.ApplyOne(ctx, &paused, client.ApplyOptions{}); err != nil {
		t.Fatalf("a worker's Node paused: %v", err)
	}
}
