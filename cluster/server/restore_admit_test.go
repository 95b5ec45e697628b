package server

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc/codes"
)

// TestRestoreIsHeldToTheNamespacesQuota: a restore makes a Volume, so it
// is admitted as the Volume's apply would be; a namespace user cannot
// restore past the namespace's quota, and nothing reaches a node.
func TestRestoreIsHeldToTheNamespacesQuota(t *testing.T) {
	t.Parallel()
	m, admin, mallory := teamUser(t)
	ctx := context.Background()
	applyOK(t, admin, `apiVersion: legion/v1
kind: Namespace
metadata: {name: team}
spec: {quota: {volumes: 1, storage: 2Gi}}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: a, namespace: team}
spec: {size: 1Gi}`)
	node, _ := legion.New(legion.KindNode)
	node.GetMetadata().Name = "n2"
	if _, _, err := m.s.store().Put(ctx, node, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	header := legion.VolumeBackupHeader{Namespace: "team", Name: "b", Node: "n2", Backend: "dir", Consistency: legion.ConsistencyFiles,
		Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 30}}
	_, err := mallory.RestoreVolume(ctx, header, strings.NewReader("data"))
	if client.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "over the quota of namespace team: volumes 2 of 1") {
		t.Fatalf("a restore past the volumes quota: %v, want RESOURCE_EXHAUSTED naming it", err)
	}
	header.Spec.Size = 0
	if _, err := mallory.RestoreVolume(ctx, header, strings.NewReader("data")); client.Code(err) != codes.ResourceExhausted ||
		!strings.Contains(err.Error(), "spec.size: missing, which namespace team's storage quota (2Gi) requires") {
		t.Fatalf("a restore of an unsized Volume under a storage quota: %v", err)
	}
	// A node tainted for another team takes none of this team's data.
	tainted, _ := legion.New(legion.KindNode)
	tainted.GetMetadata().Name = "shop-1"
	tainted.(*legion.Node).Spec.Taints = []legion.Taint{{Key: "dedicated", Value: "shop", Effect: legion.NoSchedule}}
	if _, _, err := m.s.store().Put(ctx, tainted, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	header.Node, header.Spec.Size = "shop-1", 1<<30
	if _, err := admin.ApplyOne(ctx, mustParse(t, "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: team}\nspec: {quota: {volumes: 2, storage: 2Gi}}\n")[0], client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mallory.RestoreVolume(ctx, header, strings.NewReader("data")); client.Code(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "Volume team/b: the restore's node: node shop-1 is tainted dedicated=shop:NoSchedule for others") {
		t.Fatalf("a restore onto a node tainted for others: %v", err)
	}
	if _, _, err := m.s.store().Get(legion.KindVolume, "team", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused restore made its Volume: %v", err)
	}
}
