package resolver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/procstat"
	"github.com/miekg/dns"
)

// BenchmarkAgainstDnsmasq drives Legion's resolver and Debian's dnsmasq
// with dnsperf (Debian) in the same run, with the same records, the same
// queries, the same run length and concurrency (dnsperf -T 1 -c 16
// -q 100). dnsperf is C and asks from its own process, so the Go client
// of BenchmarkResolver is not the limit; each server is a process of its
// own. With two or more CPUs the server under test is pinned to CPU 1,
// dnsperf and the upstream to CPU 0 (taskset): each server has one core,
// which is all dnsmasq (single-threaded) can use anyway. The two are
// measured in turn, round after round, each round's order the reverse of
// the last (legion dnsmasq, dnsmasq legion), so a change in the machine's
// load falls on both alike; the sub-benchmarks legion and dnsmasq report
// the totals.
//
// The queries are what a node's pods ask through their search list
// (search <ns>.legion legion, ndots:2), A and AAAA side by side as
// glibc and musl ask them:
//
//	40 % service names (svcN.bench.legion.), half A, half AAAA
//	20 % tasks.svcN.bench.legion. (10 addresses), half A, half AAAA
//	25 % names under legion. that do not exist, NXDOMAIN: the search
//	     list's misses (svcN.bench.bench.legion., hK.example.org.bench.legion.)
//	15 % names outside the cluster, forwarded to the same upstream
//	     (a dnsmasq on loopback answering 100 hK.example.org. names)
//
// The zone has 200 services of 10 ready tasks, dual-stack (every address
// has its IPv6 twin); dnsmasq gets the same records as a hosts file, with
// --local=/legion/ so unknown cluster names never leave it, and caches up
// to 10,000 answers. The resolver serves no SRV records, so none are asked.
//
// On two cores dnsperf itself (one thread, ~120,000 queries/s here) may
// be the limit when the machine is quiet: then both answer all it sends.
// So the server's own CPU time during the run is measured too (Linux,
// /proc): cpu-us/query, and queries/cpu-s, what the server answers per
// second of one CPU, which does not depend on the client's speed.
//
// LEGION_DNSPERF_SECONDS sets each dnsperf run's length (default 3),
// LEGION_DNSPERF_ROUNDS the number of rounds (default 2);
// LEGION_DNSPERF_PIN=0 pins nothing;
// LEGION_RESOLVER_CPUPROFILE=file profiles the resolver process. Metrics:
// queries/s, latency-us (mean), lost-% (queries unanswered), cpu-us/query,
// queries/cpu-s.
func BenchmarkAgainstDnsmasq(b *testing.B) {
	perf, err := exec.LookPath("dnsperf")
	if err != nil {
		b.Skip("dnsperf is not installed (apt-get install dnsperf): nothing measured")
	}
	dnsmasq, err := exec.LookPath("dnsmasq")
	if err != nil {
		b.Skip("dnsmasq is not installed (apt-get install dnsmasq-base): nothing measured")
	}
	seconds, rounds := 3, 2
	if s, err := strconv.Atoi(os.Getenv("LEGION_DNSPERF_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	if r, err := strconv.Atoi(os.Getenv("LEGION_DNSPERF_ROUNDS")); err == nil && r > 0 {
		rounds = r
	}
	dir := b.TempDir()
	zone := BuildZone(benchServices(), everyTwin)

	// The upstream both forward to, on the client's CPU.
	var ext strings.Builder
	for k := range 100 {
		fmt.Fprintf(&ext, "192.0.2.%d h%d.example.org\n2001:db8::%x h%d.example.org\n", k+1, k, k+1, k)
	}
	upstream, _ := startDnsmasq(b, dnsmasq, dir, "upstream", ext.String(), pinClient, "--local=/example.org/", "--local-ttl=300")
	// Up before either server forwards to it: a refused forward is a
	// SERVFAIL, and the two would not answer alike.
	if got := sample(b, upstream, "h5.example.org. A"); got["h5.example.org. A"] != "NOERROR 192.0.2.6" {
		b.Fatalf("the upstream answers %v", got)
	}

	var hosts strings.Builder
	for name, r := range zone.Records {
		for _, ip := range slices.Concat(r.A, r.AAAA) {
			fmt.Fprintf(&hosts, "%s %s\n", ip, strings.TrimSuffix(name, "."))
		}
	}
	queries := filepath.Join(dir, "queries")
	if err := os.WriteFile(queries, []byte(perfQueries()), 0o644); err != nil {
		b.Fatal(err)
	}
	zf := filepath.Join(dir, "zone.json")
	if err := WriteZone(zf, zone); err != nil {
		b.Fatal(err)
	}

	type server struct {
		name, addr string
		pid        int
		sent, done float64 // queries
		seconds    float64 // dnsperf's run time
		latency    float64 // seconds, summed over the answered queries
		cpu        time.Duration
		cpuOK      bool
	}
	servers := []*server{{name: "legion", cpuOK: true}, {name: "dnsmasq", cpuOK: true}}
	servers[0].addr, servers[0].pid = startLegion(b, zf, upstream)
	servers[1].addr, servers[1].pid = startDnsmasq(b, dnsmasq, dir, "dnsmasq", hosts.String(), pinServer,
		"--local=/legion/", "--local-ttl=5", "--server=/example.org/"+strings.Replace(upstream, ":", "#", 1))
	// The two must answer alike before they are timed.
	want, got := sample(b, servers[0].addr), sample(b, servers[1].addr)
	for q := range want {
		if got[q] != want[q] {
			b.Fatalf("dnsmasq answers %s with %s, legion with %s", q, got[q], want[q])
		}
	}
	// Rounds in turn, legion first then dnsmasq first (ABBA...), so a
	// change of the machine's load during the run falls on both alike.
	for round := range rounds {
		order := []*server{servers[0], servers[1]}
		if round%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, srv := range order {
			cpu0, ok0 := procstat.CPUTime(srv.pid)
			r := runDnsperf(b, perf, srv.addr, queries, seconds)
			cpu1, ok1 := procstat.CPUTime(srv.pid)
			srv.sent += r.sent
			srv.done += r.completed
			srv.seconds += r.seconds
			srv.latency += r.latency * r.completed
			srv.cpu += cpu1 - cpu0
			srv.cpuOK = srv.cpuOK && ok0 && ok1
			b.Logf("round %d %-7s %8.0f queries/s, mean latency %4.0f us, %s", round+1, srv.name, r.qps, r.latency*1e6, r.codes)
		}
	}
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			// The figures were taken above, the two servers in turn;
			// this only reports them.
			b.ReportMetric(srv.done/srv.seconds, "queries/s")
			b.ReportMetric(srv.latency/max(srv.done, 1)*1e6, "latency-us")
			b.ReportMetric(100*(srv.sent-srv.done)/max(srv.sent, 1), "lost-%")
			if srv.cpuOK && srv.cpu > 0 && srv.done > 0 {
				b.ReportMetric(float64(srv.cpu.Microseconds())/srv.done, "cpu-us/query")
				b.ReportMetric(srv.done/srv.cpu.Seconds(), "queries/cpu-s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// everyTwin maps every IPv4 address to an IPv6 twin, as a jails node's
// plan does for pods and VIPs.
func everyTwin(a netip.Addr) (netip.Addr, bool) {
	v := a.As4()
	return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0, v[1], 0, v[2], 14: 0, 15: v[3]}), a.Is4()
}

// perfQueries is the query file, 1,000 lines in the mix
// BenchmarkAgainstDnsmasq describes, interleaved.
func perfQueries() string {
	var out strings.Builder
	types := []string{"A", "AAAA"}
	for i := range 1000 {
		t := types[i%2]
		s := (i * 7) % 200
		switch p := i % 20; {
		case p < 8:
			fmt.Fprintf(&out, "svc%d.bench.legion %s\n", s, t)
		case p < 12:
			fmt.Fprintf(&out, "tasks.svc%d.bench.legion %s\n", s, t)
		case p < 15:
			fmt.Fprintf(&out, "svc%d.bench.bench.legion %s\n", s, t)
		case p < 17:
			fmt.Fprintf(&out, "h%d.example.org.bench.legion %s\n", s%100, t)
		default:
			fmt.Fprintf(&out, "h%d.example.org %s\n", s%100, t)
		}
	}
	return out.String()
}

// sample asks the given questions ("name TYPE"; by default one name of
// each kind of the mix) and sums up each answer: rcode and sorted
// addresses. A server not yet listening is asked again until it answers.
func sample(b *testing.B, addr string, questions ...string) map[string]string {
	out := map[string]string{}
	c := &dns.Client{Net: "udp", Timeout: 2 * time.Second}
	if len(questions) == 0 {
		questions = []string{"svc3.bench.legion. A", "svc3.bench.legion. AAAA", "tasks.svc4.bench.legion. A",
			"tasks.svc4.bench.legion. AAAA", "svc3.bench.bench.legion. A", "h5.example.org.bench.legion. AAAA",
			"h5.example.org. A", "h6.example.org. AAAA"}
	}
	for _, q := range questions {
		name, t, _ := strings.Cut(q, " ")
		m := new(dns.Msg)
		m.SetQuestion(name, dns.StringToType[t])
		var resp *dns.Msg
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if resp, _, err = c.Exchange(m, addr); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			b.Fatalf("%s: %v", q, err)
		}
		var ips []string
		for _, rr := range resp.Answer {
			switch r := rr.(type) {
			case *dns.A:
				ips = append(ips, r.A.String())
			case *dns.AAAA:
				ips = append(ips, r.AAAA.String())
			}
		}
		slices.Sort(ips)
		out[q] = dns.RcodeToString[resp.Rcode] + " " + strings.Join(ips, ",")
	}
	return out
}

type perfResult struct {
	qps, latency, lost, sent, completed, seconds float64
	codes                                        string
}

var (
	reQPS     = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
	reLatency = regexp.MustCompile(`Average Latency \(s\):\s+([0-9.]+)`)
	reLost    = regexp.MustCompile(`Queries lost:\s+\d+ \(([0-9.]+)%\)`)
	reDone    = regexp.MustCompile(`Queries completed:\s+(\d+)`)
	reSent    = regexp.MustCompile(`Queries sent:\s+(\d+)`)
	reRunTime = regexp.MustCompile(`Run time \(s\):\s+([0-9.]+)`)
	reCodes   = regexp.MustCompile(`Response codes:\s*(.*)`)
)

func runDnsperf(b *testing.B, perf, addr, queries string, seconds int) perfResult {
	host, port, _ := net.SplitHostPort(addr)
	args := []string{perf, "-s", host, "-p", port, "-d", queries, "-l", strconv.Itoa(seconds),
		"-T", "1", "-c", "16", "-q", "100", "-t", "2"}
	out, err := pinClient(args).CombinedOutput()
	if err != nil {
		b.Fatalf("dnsperf: %v\n%s", err, out)
	}
	var r perfResult
	if m := reCodes.FindSubmatch(out); m != nil {
		r.codes = string(m[1])
	}
	for _, f := range []struct {
		re *regexp.Regexp
		to *float64
	}{{reQPS, &r.qps}, {reLatency, &r.latency}, {reLost, &r.lost}, {reDone, &r.completed},
		{reSent, &r.sent}, {reRunTime, &r.seconds}} {
		m := f.re.FindSubmatch(out)
		if m == nil {
			b.Fatalf("dnsperf printed no %s:\n%s", f.re, out)
		}
		*f.to, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	return r
}

// pinClient and pinServer give the client (and the upstream) CPU 0 and
// the server under test CPU 1, when there are two.
func pinClient(args []string) *exec.Cmd { return pinned("0", args) }
func pinServer(args []string) *exec.Cmd { return pinned("1", args) }

func pinned(cpu string, args []string) *exec.Cmd {
	if ts, err := exec.LookPath("taskset"); err == nil && runtime.NumCPU() >= 2 && os.Getenv("LEGION_DNSPERF_PIN") != "0" {
		args = append([]string{ts, "-c", cpu}, args...)
	}
	return exec.Command(args[0], args[1:]...)
}

func freePort(b *testing.B) int {
	pc, l, err := Listen("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	l.Close()
	return port
}

// startDnsmasq runs dnsmasq on a free loopback port answering the given
// hosts file, and nothing else: no resolv.conf, no /etc/hosts.
func startDnsmasq(b *testing.B, bin, dir, name, hosts string, pin func([]string) *exec.Cmd, extra ...string) (string, int) {
	hf := filepath.Join(dir, name+".hosts")
	if err := os.WriteFile(hf, []byte(hosts), 0o644); err != nil {
		b.Fatal(err)
	}
	port := freePort(b)
	args := append([]string{bin, "--no-daemon", "--keep-in-foreground", "--no-resolv", "--no-hosts", "--addn-hosts=" + hf,
		"--listen-address=127.0.0.1", "--bind-interfaces", fmt.Sprintf("--port=%d", port),
		"--user=root", "--pid-file=", "--cache-size=10000", "--log-facility=/dev/null"}, extra...)
	cmd := pin(args)
	b.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", port), cmd.Process.Pid
}

// startLegion runs this test binary again as Legion's resolver (see
// serveForBenchmark), so it is a process of its own as dnsmasq is.
func startLegion(b *testing.B, zoneFile, upstream string) (string, int) {
	cmd := pinServer([]string{os.Args[0]})
	cmd.Env = append(os.Environ(), benchServeEnv+"="+zoneFile, benchUpstreamEnv+"="+upstream)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	b.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Signal(syscall.SIGTERM)
			cmd.Wait()
		}
	})
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	addr, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("the resolver process printed no address: %v", err)
	}
	go io.Copy(io.Discard, out)
	return strings.TrimSpace(addr), cmd.Process.Pid
}

const (
	benchServeEnv    = "LEGION_RESOLVER_BENCH_ZONE"
	benchUpstreamEnv = "LEGION_RESOLVER_BENCH_UPSTREAM"
)

// serveForBenchmark is the resolver process startLegion runs: it serves
// the zone file on a free loopback port, prints the address and serves
// until SIGTERM or until the zone file is gone.
func serveForBenchmark(zoneFile string) {
	pc, l, err := Listen("127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(pc.LocalAddr().String())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if p := os.Getenv("LEGION_RESOLVER_CPUPROFILE"); p != "" {
		// go test's -cpuprofile profiles the benchmark, not this process.
		f, err := os.Create(p)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	s := &Server{ZoneFile: zoneFile, Upstreams: strings.Fields(os.Getenv(benchUpstreamEnv))}
	if err := s.Serve(ctx, pc, l); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pprof.StopCPUProfile()
	os.Exit(0)
}
