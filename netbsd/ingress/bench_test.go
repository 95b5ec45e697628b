package ingress

import (
	"io"
	"net/http"
	"testing"
)

// BenchmarkProxy compares requests per second through the proxy with the
// same requests straight to its one backend, over kept-alive HTTP/1.1.
//
//	go test -run '^$' -bench Proxy -benchtime 2s ./netbsd/ingress
func BenchmarkProxy(b *testing.B) {
	be := namedBackend(b, "web")
	p := &Proxy{}
	p.SetRoutes([]Route{{Namespace: "ns", Name: "web", Host: "bench.example", Backends: []string{addr(be)}}})
	proxyAddr := startProxy(b, p, false)

	run := func(b *testing.B, target string, parallel bool) {
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		defer tr.CloseIdleConnections()
		one := func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+target+"/", nil)
			req.Host = "bench.example"
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
			}
		}
		b.ResetTimer()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					one()
				}
			})
		} else {
			for b.Loop() {
				one()
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	}
	b.Run("direct", func(b *testing.B) { run(b, addr(be), false) })
	b.Run("proxy", func(b *testing.B) { run(b, proxyAddr, false) })
	b.Run("direct-parallel", func(b *testing.B) { run(b, addr(be), true) })
	b.Run("proxy-parallel", func(b *testing.B) { run(b, proxyAddr, true) })
}
