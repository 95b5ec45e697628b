package dispatcher_test

import (
	"context"
	"net/netip"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/leader"
	"github.com/legionbsd/legion/cluster/netplan"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/netbsd/addrplan"
)

// A node registering with a cluster of its own ranges gets its /24 of
// the stored pod range and the stored service range; VIPs come from it.
func TestRegisterAndVIPsFollowTheStoredRanges(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	plan := addrplan.Plan{Pod: netip.MustParsePrefix("10.42.0.0/16"), Service: netip.MustParsePrefix("10.43.0.0/16")}
	if err := netplan.Write(context.Background(), m.Store, plan); err != nil {
		t.Fatal(err)
	}
	r := register(t, dial(t, m, "node-a", pki.RoleWorker), legion.NodeStatus{Hostname: "node-a"})
	if r.GetPodCidr() != "10.42.0.0/24" || r.GetServiceCidr() != "10.43.0.0/16" {
		t.Errorf("registration gave pod subnet %s and service range %s", r.GetPodCidr(), r.GetServiceCidr())
	}
	put(t, m.Store, mustService(t))
	if err := leader.AllocateVIPs(context.Background(), m.Store); err != nil {
		t.Fatal(err)
	}
	o, _, err := m.Store.Get(legion.KindService, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if vip := o.(*legion.Service).Status.VIP; vip != "10.43.0.1" {
		t.Errorf("VIP %s, want 10.43.0.1, the first of the stored service range", vip)
	}
}

func mustService(t *testing.T) legion.Object {
	t.Helper()
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  pod:
    containers: [{name: web, image: localhost/web:1}]
  endpoint:
    ports: [{name: http, port: 80, targetPort: 8080}]
`))
	if err != nil || len(objs) != 1 {
		t.Fatalf("manifest: %v", err)
	}
	return objs[0]
}
