package leader

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/store"
)

// listCounting counts the lists of Services made through it.
type listCounting struct {
	*store.Store
	services atomic.Int64
}

func (s *listCounting) List(kind legion.Kind, ns string, keep func(legion.Object) bool) ([]legion.Object, uint64, error) {
	if kind == legion.KindService {
		s.services.Add(1)
	}
	return s.Store.List(kind, ns, keep)
}

func vipService(t *testing.T, name string, mode legion.EndpointMode) *legion.Service {
	t.Helper()
	o, err := legion.New(legion.KindService)
	if err != nil {
		t.Fatal(err)
	}
	s := o.(*legion.Service)
	s.Metadata.Name, s.Metadata.Namespace = name, legion.DefaultNamespace
	s.Spec.Pod.Containers = []legion.Container{{Name: "web", Image: "localhost/web:1"}}
	s.Spec.Endpoint.Mode = mode
	s.Spec.Endpoint.Ports = []legion.ServicePort{{Name: "http", Port: 80, TargetPort: legion.PortRef{Number: 8080}}}
	if err := legion.Admit(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// A service made gets its VIP, and so does one made after a stream of
// status writes to services that have theirs, which a rollout makes by
// the hundred: those wake no allocation, each of which lists and decodes
// every service.
func TestVIPAllocatorWakesForServicesThatNeedOne(t *testing.T) {
	t.Parallel()
	st := &listCounting{Store: dispatchertest.OpenStore(t)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("RunVIPAllocator: %v", err)
		}
	})
	go func() { done <- RunVIPAllocator(ctx, st, nil) }()

	vipOf := func(name string) string {
		o, _, err := st.Get(legion.KindService, legion.DefaultNamespace, name)
		if err != nil {
			return ""
		}
		return o.(*legion.Service).Status.VIP
	}
	put := func(s *legion.Service) {
		t.Helper()
		if _, _, err := st.Put(ctx, s, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put(vipService(t, "web", legion.EndpointVIP))
	put(vipService(t, "peers", legion.EndpointDNSRR))
	poll(t, "a VIP for web", 5*time.Second, func() bool { return vipOf("web") != "" })
	before := st.services.Load()

	const statusWrites = 50
	for i := range statusWrites {
		for _, name := range []string{"web", "peers"} {
			o, _, err := st.Get(legion.KindService, legion.DefaultNamespace, name)
			if err != nil {
				t.Fatal(err)
			}
			s := o.(*legion.Service)
			s.Status.Running = i % 2 // a rollout's progress
			if _, err := st.PutStatus(ctx, s, store.Precondition{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(vipService(t, "api", legion.EndpointVIP))
	poll(t, "a VIP for api", 5*time.Second, func() bool { return vipOf("api") != "" })
	if vipOf("peers") != "" {
		t.Errorf("the DNS round-robin service got VIP %s", vipOf("peers"))
	}
	if vipOf("api") == vipOf("web") {
		t.Errorf("api and web share VIP %s", vipOf("api"))
	}
	// The allocation for api; one more at most, had the allocator read
	// between web's VIP and the count.
	if n := st.services.Load() - before; n > 2 {
		t.Errorf("services listed %d times for %d status writes and one service made: want 1", n, 2*statusWrites)
	}
}
