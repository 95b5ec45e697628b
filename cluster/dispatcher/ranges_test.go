package dispatcher_test

import (
	"context"
	"fmt"
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

// The VIPs of many services applied at once are written together: one
// commit for all of them, not one each, and no two alike.
func TestVIPsOfManyServicesAreWrittenTogether(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	const n = 40
	for i := range n {
		s := mustService(t).(*legion.Service)
		s.Metadata.Name = fmt.Sprintf("web-%02d", i)
		put(t, m.Store, s)
	}
	appends, _ := m.Store.LogAppends()
	if err := leader.AllocateVIPs(context.Background(), m.Store); err != nil {
		t.Fatal(err)
	}
	after, _ := m.Store.LogAppends()
	if got := after - appends; got > n/4 {
		t.Errorf("allocating %d VIPs took %d log appends: written one at a time", n, got)
	}
	objs, _, err := m.Store.List(legion.KindService, "default", nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, o := range objs {
		s := o.(*legion.Service)
		vip := s.Status.VIP
		if _, err := netip.ParseAddr(vip); err != nil {
			t.Errorf("service %s: VIP %q", s.Metadata.Name, vip)
		} else if other, ok := seen[vip]; ok {
			t.Errorf("services %s and %s share the VIP %s", other, s.Metadata.Name, vip)
		}
		seen[vip] = s.Metadata.Name
	}
	if len(objs) != n {
		t.Errorf("%d services listed, want %d", len(objs), n)
	}
}
