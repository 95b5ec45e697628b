package daemon

import (
	"io"
	"math/rand/v2"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/legionbsd/legion/netbsd/addrplan"
	"github.com/legionbsd/legion/netbsd/loopback"
)

// Init on the process platform fills the ranges not given with a free
// pair, keeps those given, and refuses ranges over one of the host's
// networks, naming it.
func TestRangesChosenAndChecked(t *testing.T) {
	t.Parallel()
	choose, release := Ranges(Options{Platform: PlatformProcess})
	t.Cleanup(release)
	// Another test's cluster may let its octets go between the reading of
	// those in use and the choice, which may then take them: a choice of
	// octets in use is made again, and fails the test the third time.
	// (loopback's TestFreePlanSkipsUsedRanges checks the choice itself.)
	var got addrplan.Plan
	for try := 1; ; try++ {
		before, err := loopback.UsedOctets(loopback.ProcNet)
		if err != nil {
			t.Fatal(err)
		}
		if got, err = choose(addrplan.Plan{}); err != nil {
			t.Fatal(err)
		}
		if err := got.Validate(); err != nil {
			t.Fatal(err)
		}
		if !before[got.PodOctet()] && !before[got.ServiceOctet()] {
			break
		}
		if try == 3 {
			t.Fatalf("chose %v, whose 127/8 images were in use, %d times", got, try)
		}
		release()
	}
	after, err := loopback.UsedOctets(loopback.ProcNet)
	if err != nil {
		t.Fatal(err)
	}
	if !after[got.PodOctet()] {
		t.Errorf("chose %v but holds no claim on it", got)
	}
	// A range given is kept. Not a fixed one: another test's cluster may
	// have a bridge in it (10.42.0.0/16 once overlapped one); this test's
	// own claim keeps the one chosen above off every host network.
	given := got.Pod
	if p, err := choose(addrplan.Plan{Pod: given}); err != nil || p.Pod != given || p.Service.Overlaps(given) {
		t.Errorf("with --pod-cidr %s: %v, %v", given, p, err)
	}
	chooseJails, releaseJails := Ranges(Options{Platform: PlatformJails})
	t.Cleanup(releaseJails)
	jails, err := chooseJails(addrplan.Plan{})
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

// Clusters made on one host at the same moment, all starting their
// search at the same pair, still get a pair each: the pod range is
// claimed, and a claimed range is passed over (once, two "legion up"
// started together both took 10.212.0.0/16).
func TestRangesChosenAtOnceNeverShared(t *testing.T) {
	t.Parallel()
	const clusters = 8
	var (
		mu     sync.Mutex
		claims []io.Closer
	)
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range claims {
			c.Close()
		}
	})
	keep := func(c io.Closer) {
		mu.Lock()
		defer mu.Unlock()
		claims = append(claims, c)
	}
	start := rand.IntN(126)
	plans := make([]addrplan.Plan, clusters)
	errs := make([]error, clusters)
	var ready, done sync.WaitGroup
	ready.Add(1)
	for i := range clusters {
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Wait()
			plans[i], errs[i] = freePlan(addrplan.Plan{}, start, keep)
		}()
	}
	ready.Done()
	done.Wait()
	for i := range clusters {
		if errs[i] != nil {
			t.Fatalf("cluster %d: %v", i, errs[i])
		}
		for j := range i {
			if plans[i].Pod.Overlaps(plans[j].Pod) || plans[i].Pod.Overlaps(plans[j].Service) || plans[i].Service.Overlaps(plans[j].Pod) {
				t.Errorf("clusters %d and %d share addresses: %v and %v", j, i, plans[j], plans[i])
			}
		}
	}
	if len(claims) != clusters {
		t.Errorf("%d claims held for %d clusters", len(claims), clusters)
	}
	// A claim shows to a later chooser as a used range.
	used, err := loopback.UsedOctets(loopback.ProcNet)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range plans {
		if !used[p.PodOctet()] {
			t.Errorf("cluster %d's claimed pod range %s is not seen as used", i, p.Pod)
		}
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
