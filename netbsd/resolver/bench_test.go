package resolver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// benchZone is 200 services of 10 tasks each.
func benchServices() []Service {
	var svcs []Service
	for s := 0; s < 200; s++ {
		svc := Service{Namespace: "bench", Name: fmt.Sprintf("svc%d", s), VIP: fmt.Sprintf("10.201.%d.%d", s/250, s%250+1)}
		for i := 0; i < 10; i++ {
			svc.Tasks = append(svc.Tasks, Task{IP: fmt.Sprintf("10.200.%d.%d", s%250, i+2), Ready: true})
		}
		svcs = append(svcs, svc)
	}
	return svcs
}

// measure sends A queries for the services' names from parallel clients
// and reports queries per second.
func measure(b *testing.B, addr string) {
	b.Helper()
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.RunParallel(func(pb *testing.PB) {
		c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
		conn, err := c.Dial(addr)
		if err != nil {
			b.Error(err)
			return
		}
		defer conn.Close()
		m := new(dns.Msg)
		for pb.Next() {
			i := n.Add(1)
			m.SetQuestion(fmt.Sprintf("svc%d.bench.legion.", i%200), dns.TypeA)
			resp, _, err := c.ExchangeWithConn(m, conn)
			if err != nil {
				b.Error(err)
				return
			}
			if len(resp.Answer) != 1 {
				b.Errorf("answer %v", resp)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "queries/s")
}

// BenchmarkResolver: Legion's resolver answering cluster names.
func BenchmarkResolver(b *testing.B) {
	dir := b.TempDir()
	zf := filepath.Join(dir, "zone.json")
	if err := WriteZone(zf, BuildZone(benchServices(), nil)); err != nil {
		b.Fatal(err)
	}
	pc, l, err := Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s := &Server{ZoneFile: zf}
	go func() { done <- s.Serve(ctx, pc, l) }()
	defer func() { cancel(); <-done }()
	waitAnswer(b, pc.LocalAddr().String())
	b.ResetTimer()
	measure(b, pc.LocalAddr().String())
}

// BenchmarkDnsmasq: Debian's dnsmasq serving the same records from a hosts
// file, on the same machine in the same run, for comparison.
func BenchmarkDnsmasq(b *testing.B) {
	bin, err := exec.LookPath("dnsmasq")
	if err != nil {
		b.Skip("dnsmasq is not installed (apt-get install dnsmasq-base)")
	}
	dir := b.TempDir()
	var hosts strings.Builder
	for _, s := range benchServices() {
		fmt.Fprintf(&hosts, "%s %s.%s.legion\n", s.VIP, s.Name, s.Namespace)
	}
	hf := filepath.Join(dir, "hosts")
	os.WriteFile(hf, []byte(hosts.String()), 0o644)
	pc, _ := net.ListenPacket("udp", "127.0.0.1:0")
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	cmd := exec.Command(bin, "--no-daemon", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--addn-hosts="+hf,
		"--listen-address=127.0.0.1", "--bind-interfaces", fmt.Sprintf("--port=%d", port), "--local=/legion/",
		"--user=root", "--pid-file=", "--cache-size=10000", "--local-ttl=5")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitAnswer(b, addr)
	b.ResetTimer()
	measure(b, addr)
}

func waitAnswer(b *testing.B, addr string) {
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion("svc1.bench.legion.", dns.TypeA)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if resp, _, err := c.Exchange(m, addr); err == nil && len(resp.Answer) == 1 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("no answer from %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
