package server_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/audit"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/testcluster"
)

// A change that reaches a follower is recorded there once, with the
// leader's answer and the leader as the manager that decided; the
// follower hands it to the leader, which writes it into the system
// namespace; and no event or batch holds a Secret's value.
func TestAuditRecordsAChangeOnceWhereItArrives(t *testing.T) {
	t.Parallel()
	// Each change must be made once (a write asked again would be recorded
	// again): a lease a loaded machine does not outrun, as two managers
	// both make every quorum.
	c := testcluster.New(t, testcluster.Options{Managers: 2, Leader: true,
		Configure: func(_ int, c *server.Config) { c.Timing = store.SteadyTiming() }})
	leader := c.WaitLeader()
	follower := c.Managers[0]
	if follower == leader {
		follower = c.Managers[1]
	}
	admin := c.ClientTo(follower)
	ctx := context.Background()
	const value = "s3cret-VALUE-7f3a"
	s, _ := legion.New(legion.KindSecret)
	s.GetMetadata().Namespace, s.GetMetadata().Name = "default", "pw"
	s.(*legion.Secret).Spec.Data = []byte(value)
	start := time.Now()
	if _, err := admin.ApplyOne(ctx, s, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Delete(ctx, legion.KindSecret, "default", "pw", nil); err != nil {
		t.Fatal(err)
	}
	// A refused change is recorded too, with the refusal's message.
	bad := legion.Clone(s)
	bad.GetMetadata().Namespace = legion.SystemNamespace
	_, refusal := admin.ApplyOne(ctx, bad, client.ApplyOptions{})
	if refusal == nil {
		t.Fatal("an apply into the reserved namespace was taken")
	}

	var events []client.AuditEvent
	testcluster.WaitFor(t, "the follower's events at the leader", 10*time.Second, func() bool {
		var err error
		events, err = admin.Audit(ctx, client.AuditFilter{Kind: "secret", Since: start})
		return err == nil && len(events) >= 3
	})
	if len(events) != 3 {
		t.Fatalf("%d events, want 3 (each recorded once): %+v", len(events), events)
	}
	leaderID, followerID := leader.Server.NodeID(), follower.Server.NodeID()
	for i, want := range []struct{ action, ns, outcome string }{
		{audit.ActionApply, "default", "ok"}, {audit.ActionDelete, "default", "ok"}, {audit.ActionApply, legion.SystemNamespace, "error"},
	} {
		e := events[i]
		if e.Action != want.action || e.Namespace != want.ns || e.Name != "pw" || e.Outcome != want.outcome || e.Actor == "" || e.Role != "admin" {
			t.Errorf("event %d: %+v, want %s of Secret %s/pw by the admin, %s", i, e, want.action, want.ns, want.outcome)
		}
		if e.Time.Before(start.Add(-time.Second)) || e.Time.After(time.Now()) {
			t.Errorf("event %d at %s, the test began at %s", i, e.Time, start)
		}
	}
	// Changes went on to the leader, which decided; the refusal was the
	// follower's own.
	if events[0].Manager != leaderID || events[1].Manager != leaderID || events[2].Manager != followerID {
		t.Errorf("deciding managers %s, %s, %s; want %s, %s, %s", events[0].Manager, events[1].Manager, events[2].Manager, leaderID, leaderID, followerID)
	}
	if msg := events[2].Message; msg == "" || !strings.Contains(refusal.Error(), msg) {
		t.Errorf("refusal recorded as %q; the caller was told %v", msg, refusal)
	}
	if got, err := admin.Audit(ctx, client.AuditFilter{Kind: "Secret", Action: audit.ActionDelete, Since: start}); err != nil || len(got) != 1 {
		t.Errorf("--action delete: %d events, %v", len(got), err)
	}

	// No batch holds the value, in the clear or encoded.
	batches, _, err := leader.Store().List(legion.KindConfig, legion.SystemNamespace, func(o legion.Object) bool {
		return strings.HasPrefix(o.GetMetadata().Name, audit.BatchPrefix)
	})
	if err != nil || len(batches) == 0 {
		t.Fatalf("%d audit batches, %v", len(batches), err)
	}
	for _, b := range batches {
		array, err := audit.BatchJSON(b.(*legion.Config).Spec.Data)
		if err != nil {
			t.Fatalf("batch %s: %v", b.GetMetadata().Name, err)
		}
		data := string(array)
		if b.GetMetadata().Labels[audit.CountLabel] == "" {
			t.Errorf("batch %s has no count label", b.GetMetadata().Name)
		}
		if strings.Contains(data, value) || strings.Contains(data, base64.StdEncoding.EncodeToString([]byte(value))) {
			t.Errorf("batch %s holds the Secret's value: %s", b.GetMetadata().Name, data)
		}
	}
}
