package server

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/legionbsd/legion/cluster/netplan"
	"github.com/legionbsd/legion/netbsd/addrplan"
)

// Init stores the ranges it was given, completing the rest through
// Config.Ranges, and answers with them; ranges of another size are
// refused before the daemon becomes anything.
func TestInitStoresTheClusterRanges(t *testing.T) {
	t.Parallel()
	var asked addrplan.Plan
	m := newManager(t, func(c *Config) {
		c.Ranges = func(a addrplan.Plan) (addrplan.Plan, error) {
			asked = a
			a.Service = netip.MustParsePrefix("10.43.0.0/16")
			return a, nil
		}
	})
	t.Cleanup(m.stop)
	_, err := m.bare().InitRanges(context.Background(), "10.42.0.0/24", "")
	if err == nil || !strings.Contains(err.Error(), "pod CIDR 10.42.0.0/24: expected an IPv4 /16") {
		t.Fatalf("init with a /24: %v", err)
	}
	if m.s.role() != "" {
		t.Fatalf("a refused init left the daemon a %s", m.s.role())
	}
	resp, err := m.bare().InitRanges(context.Background(), "10.42.0.0/16", "")
	if err != nil {
		t.Fatal(err)
	}
	if asked.Pod != netip.MustParsePrefix("10.42.0.0/16") || asked.Service.IsValid() {
		t.Errorf("Config.Ranges was asked %v", asked)
	}
	if resp.PodCIDR != "10.42.0.0/16" || resp.ServiceCIDR != "10.43.0.0/16" {
		t.Errorf("init answered ranges %s and %s", resp.PodCIDR, resp.ServiceCIDR)
	}
	plan, err := netplan.Read(m.s.store())
	if err != nil {
		t.Fatal(err)
	}
	if want := (addrplan.Plan{Pod: netip.MustParsePrefix("10.42.0.0/16"), Service: netip.MustParsePrefix("10.43.0.0/16")}); plan != want {
		t.Errorf("stored plan %v, want %v", plan, want)
	}
}
