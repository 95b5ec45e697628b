package dispatcherclient_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
)

func lun(name string) *legion.Volume {
	return &legion.Volume{Header: header(legion.KindVolume, "web", name), Spec: legion.VolumeSpec{Driver: legion.DriverISCSI,
		ISCSI: &legion.ISCSIVolume{Portal: "192.0.2.5", Target: "iqn.2026-01.example:" + name}}}
}

func mounting(name, node, volume string) *legion.Task {
	t := task(name, node, "")
	t.Spec.Volumes = map[string]string{"data": volume}
	return t
}

// Sessions that know only a follower claim and release through the
// leader; another node's claim comes back refused with the leader's code
// and reason; the claimed Volume reaches the node's assignments.
func TestSessionClaimsAndReleasesThroughTheLeader(t *testing.T) {
	t.Parallel()
	ca := dispatchertest.NewCA(t)
	lst, fst := dispatchertest.OpenPair(t)
	ll, fl := dispatchertest.Listen(t), dispatchertest.Listen(t)
	la, fa := ll.Addr().String(), fl.Addr().String()
	peers := func() (string, []string) { return la, []string{la, fa} }
	dispatchertest.Serve(t, ca, lst, ll, peers)
	dispatchertest.Serve(t, ca, fst, fl, peers)
	put(t, lst, lun("db"))
	put(t, lst, mounting("a-1", "node-a", "db"))
	put(t, lst, mounting("b-1", "node-b", "db"))
	a, b := newSession(t, ca, "node-a", fa), newSession(t, ca, "node-b", fa)
	ctx := ctxT(t)

	v, err := a.ClaimVolume(ctx, "web", "db", "a-1", "iscsi da1", []string{"s1"})
	if err != nil {
		t.Fatal(err)
	}
	if v.Status.Node != "node-a" || v.Status.Backend != "iscsi da1" || v.Metadata.Name != "db" || !slices.Equal(v.Status.Snapshots, []string{"s1"}) {
		t.Fatalf("claim replied %+v, want db bound to node-a with its snapshot s1", v)
	}
	if o, _, err := lst.Get(legion.KindVolume, "web", "db"); err != nil || o.(*legion.Volume).Status.Node != "node-a" {
		t.Fatalf("db on the leader: %+v %v, want bound to node-a", o, err)
	}
	_, err = b.ClaimVolume(ctx, "web", "db", "b-1", "iscsi da2", nil)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "volume web/db is held by node node-a") {
		t.Fatalf("node-b's claim: %v, want FailedPrecondition naming the holder", err)
	}

	ch, err := a.Assignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	volumeOn := func(node string) {
		t.Helper()
		deadline := time.NewTimer(15 * time.Second)
		defer deadline.Stop()
		var last []*legion.Volume
		for {
			select {
			case as, ok := <-ch:
				if !ok {
					t.Fatal("assignments channel closed")
				}
				last = as.Volumes
				if len(last) == 1 && last[0].Metadata.Name == "db" && last[0].Status.Node == node {
					return
				}
			case <-deadline.C:
				t.Fatalf("no set with db on %q within 15s; last volumes %+v", node, last)
			}
		}
	}
	volumeOn("node-a")
	if err := a.ReleaseVolume(ctx, "web", "db"); err != nil {
		t.Fatal(err)
	}
	if o, _, err := lst.Get(legion.KindVolume, "web", "db"); err != nil || o.(*legion.Volume).Status.Node != "" {
		t.Fatalf("db on the leader after the release: %+v %v, want free", o, err)
	}
	volumeOn("")
	if _, err := b.ClaimVolume(ctx, "web", "db", "b-1", "iscsi da2", nil); err != nil {
		t.Fatalf("node-b's claim once released: %v", err)
	}
}

// A claim for a task the node does not run is refused, not retried on
// other managers.
func TestSessionClaimRefusedForAnotherNodesTask(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	put(t, m.Store, lun("db"))
	put(t, m.Store, mounting("b-1", "node-b", "db"))
	a := newSession(t, m.CA, "node-a", m.Addr)
	_, err := a.ClaimVolume(ctxT(t), "web", "db", "b-1", "iscsi da1", nil)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "task web/b-1") {
		t.Fatalf("claim for node-b's task: %v, want PermissionDenied naming the task", err)
	}
	o, _, err := m.Store.Get(legion.KindVolume, "web", "db")
	if err != nil {
		t.Fatal(err)
	}
	if o.(*legion.Volume).Status.Node != "" {
		t.Fatalf("refused claim bound the volume: %+v", o.(*legion.Volume).Status)
	}
}
