package server

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc/codes"
)

func tolerating(ns, name, toleration string) string {
	return `apiVersion: legion/v1
kind: Service
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: localhost/app:1}]}
  placement: {tolerations: [` + toleration + `]}`
}

// TestAdmissionTolerationsAreTheNamespaces: nodes the cluster admin
// tainted for a team stay that team's, so a namespace user's workload may
// tolerate only the taints its Namespace lists; what it tolerated before
// stays, a PreferNoSchedule toleration needs nothing, and the admin's
// workloads tolerate any.
func TestAdmissionTolerationsAreTheNamespaces(t *testing.T) {
	t.Parallel()
	m, admin, mallory := teamUser(t)
	ctx := context.Background()
	const shop = "{key: dedicated, value: shop, effect: NoSchedule}"
	applyRefused(t, m, mallory, tolerating("team", "web", shop), codes.PermissionDenied,
		"Service team/web: spec.placement.tolerations[0]: dedicated=shop:NoSchedule would run it on nodes tainted for others: "+
			"namespace team's users may tolerate a taint once Namespace team lists it in spec.security.tolerations")
	applyRefused(t, m, mallory, `apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly, namespace: team}
spec:
  schedule: "0 3 * * *"
  job:
    pod: {containers: [{name: c, image: localhost/app:1}]}
    placement: {tolerations: [{key: dedicated}]}`, codes.PermissionDenied,
		"CronJob team/nightly: spec.job.placement.tolerations[0]: dedicated would run it")
	applyOK(t, mallory, tolerating("team", "soft", "{key: dedicated, value: shop, effect: PreferNoSchedule}"))

	// The admin's service keeps its toleration when the user scales it.
	applyOK(t, admin, tolerating("team", "api", shop))
	applyOK(t, mallory, strings.Replace(tolerating("team", "api", shop), "replicas: 1", "replicas: 2", 1))

	// Given the taint's key, the team tolerates it with any value.
	ns, _ := legion.New(legion.KindNamespace)
	ns.GetMetadata().Name = "team"
	ns.(*legion.Namespace).Spec.Security.Tolerations = []legion.Toleration{{Key: "dedicated", Effect: legion.NoSchedule}}
	if _, err := admin.ApplyOne(ctx, ns, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	applyOK(t, mallory, tolerating("team", "web", shop))
	applyRefused(t, m, mallory, tolerating("team", "evict", "{key: dedicated, value: shop, effect: NoExecute}"), codes.PermissionDenied,
		"spec.placement.tolerations[0]: dedicated=shop:NoExecute")
}

// TestAdmissionVolumeNodesAreTheNamespaces: a namespace user's Volume may
// not keep its data on a node tainted for others (spec.node set or moved
// there) unless its Namespace tolerates the taint; a Volume already there
// is kept, and the admin's Volumes go anywhere.
func TestAdmissionVolumeNodesAreTheNamespaces(t *testing.T) {
	t.Parallel()
	m, admin, mallory := teamUser(t)
	ctx := context.Background()
	for _, n := range []legion.Object{
		&legion.Node{Header: legion.Header{Kind: legion.KindNode, Metadata: legion.Metadata{Name: "shop-1"}},
			Spec: legion.NodeSpec{Taints: []legion.Taint{{Key: "dedicated", Value: "shop", Effect: legion.NoSchedule}}}},
		&legion.Node{Header: legion.Header{Kind: legion.KindNode, Metadata: legion.Metadata{Name: "soft-1"}},
			Spec: legion.NodeSpec{Taints: []legion.Taint{{Key: "spare", Effect: legion.PreferNoSchedule}}}},
	} {
		if _, _, err := m.s.Store().Put(ctx, n, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	applyRefused(t, m, mallory, volYAML("team", "data", "{driver: zfs, node: shop-1}"), codes.PermissionDenied,
		"Volume team/data: spec.node: node shop-1 is tainted dedicated=shop:NoSchedule for others: "+
			"namespace team's users may keep data there once Namespace team lists the taint in spec.security.tolerations")
	applyOK(t, mallory, volYAML("team", "data", "{driver: zfs, node: soft-1}"))
	applyRefused(t, m, mallory, volYAML("team", "data", "{driver: zfs, node: shop-1}"), codes.PermissionDenied,
		"Volume team/data: spec.node: node shop-1 is tainted")

	// The admin's Volume on that node stays the user's to change.
	applyOK(t, admin, volYAML("team", "kept", "{driver: zfs, node: shop-1}"))
	applyOK(t, mallory, volYAML("team", "kept", "{driver: zfs, node: shop-1, size: 1Gi}"))

	ns, _ := legion.New(legion.KindNamespace)
	ns.GetMetadata().Name = "team"
	ns.(*legion.Namespace).Spec.Security.Tolerations = []legion.Toleration{{Key: "dedicated", Value: "shop"}}
	if _, err := admin.ApplyOne(ctx, ns, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	applyOK(t, mallory, volYAML("team", "data", "{driver: zfs, node: shop-1}"))
}
