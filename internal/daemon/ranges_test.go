package daemon

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/netbsd/loopback"
)

// Init on the process platform fills the ranges not given with a free
// pair, keeps those given, and refuses ranges over one of the host's
// networks, naming it.
func TestRangesChosenAndChecked(t *testing.T) {
	t.Parallel()
	choose := Ranges(Options{Platform: PlatformProcess})
	got, err := choose(addrplan.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Validate(); err != nil {
		t.Fatal(err)
	}
	used, err := loopback.UsedOctets("/proc/net")
	if err != nil {
		t.Fatal(err)
	}
	if used[got.PodOctet()] || used[got.ServiceOctet()] {
		t.Errorf("chose %v, whose 127/8 images are in use", got)
	}
	given := netip.MustParsePrefix("10.42.0.0/16")
	if p, err := choose(addrplan.Plan{Pod: given}); err != nil || p.Pod != given || p.Service.Overlaps(given) {
		t.Errorf("with --pod-cidr %s: %v, %v", given, p, err)
	}
	jails, err := Ranges(Options{Platform: PlatformJails})(addrplan.Plan{})
	if err == nil && jails != addrplan.Default() {
		t.Errorf("jails chose %v, want the defaults", jails)
	}

	nets, err := hostNets(false)
	if err != nil {
		t.Fatal(err)
	}
	var hostNet netip.Prefix
	for _, n := range nets["this host"] {
		if n.Addr().Is4() && n.Bits() >= 16 {
			hostNet = n
			break
		}
	}
	if !hostNet.IsValid() {
		t.Skip("this host has no IPv4 network of /16 or smaller to collide with")
	}
	over := netip.PrefixFrom(hostNet.Addr(), 16).Masked()
	_, err = choose(addrplan.Plan{Pod: over})
	if err == nil || !strings.Contains(err.Error(), "network "+hostNet.String()+" overlaps the pod CIDR "+over.String()) {
		t.Errorf("pod range %s over host network %s: %v", over, hostNet, err)
	}
}

// A node builds the cluster's plan from what registration gave it.
func TestNodePlanFromRegistration(t *testing.T) {
	t.Parallel()
	p, n, err := nodePlan("10.42.7.0/24", "10.43.0.0/16")
	if err != nil || n != 7 || p.Pod != netip.MustParsePrefix("10.42.0.0/16") || p.Service != netip.MustParsePrefix("10.43.0.0/16") {
		t.Errorf("nodePlan = %v, %d, %v", p, n, err)
	}
	if p, n, err := nodePlan("", ""); err != nil || n != 1 || p != addrplan.Default() {
		t.Errorf("from an old manager: %v, %d, %v", p, n, err)
	}
	if _, _, err := nodePlan("10.42.7.0/25", ""); err == nil {
		t.Error("a /25 node subnet was taken")
	}
}
