package ingress

import (
	"crypto/tls"
	"net/http"
	"sync"
	"testing"
)

// SetRoutes and SetCertificates while requests run: every answer comes from
// one table or the other, never a mix or a race (run with -race).
func TestSetRoutesWhileServing(t *testing.T) {
	a, b := addr(namedBackend(t, "a")), addr(namedBackend(t, "b"))
	tableA := []Route{{Namespace: "ns", Name: "web", Host: "x.example", Backends: []string{a}}}
	tableB := []Route{{Namespace: "ns", Name: "web", Host: "x.example", Path: "/", Backends: []string{b}},
		{Namespace: "ns", Name: "other", Host: "y.example", Backends: []string{b}}}
	p := &Proxy{}
	p.SetRoutes(tableA)
	proxyAddr := startProxy(t, p, false)
	c := client(t)

	stop := make(chan struct{})
	var swapper sync.WaitGroup
	swapper.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if i%2 == 0 {
				p.SetRoutes(tableB)
			} else {
				p.SetRoutes(tableA)
			}
			p.SetCertificates(map[string]*tls.Certificate{"ns/x": {}})
		}
	})
	seen := map[string]int{}
	for range 200 {
		r, _ := get(t, c, "http", proxyAddr, "x.example", "/", nil)
		if r.Status != http.StatusOK || (r.Backend != "a" && r.Backend != "b") {
			t.Fatalf("answer %+v, want 200 from a or b", r)
		}
		seen[r.Backend]++
	}
	close(stop)
	swapper.Wait()
	if seen["a"]+seen["b"] != 200 {
		t.Errorf("answers %v, want 200 in all", seen)
	}
}
