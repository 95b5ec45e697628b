package resolver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
	"go.uber.org/goleak"
)

// Every server a test starts is stopped by the time the tests end. Run
// by BenchmarkAgainstDnsmasq, the test binary is the resolver instead.
func TestMain(m *testing.M) {
	if zf := os.Getenv(benchServeEnv); zf != "" {
		serveForBenchmark(zf)
	}
	goleak.VerifyTestMain(m)
}

// twin is 5.7's mapping for pod addresses, enough for these tests.
func twin(a netip.Addr) (netip.Addr, bool) {
	b := a.As4()
	if b[0] != 10 || b[1] != 200 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0x02, 0, 0, b[2], 0, 0, 0, 0, 0, 0, 0, b[3]}), true
}

func testServices() []Service {
	var many []Task
	for i := 1; i <= 60; i++ {
		many = append(many, Task{IP: fmt.Sprintf("10.200.1.%d", i), Ready: true})
	}
	return []Service{
		{Namespace: "shop", Name: "web", VIP: "10.201.0.5", Tasks: []Task{
			{IP: "10.200.1.11", Ready: true}, {IP: "10.200.2.17", Ready: true}, {IP: "10.200.1.12", Ready: false}}},
		{Namespace: "shop", Name: "db", DNSRR: true, Stateful: true, Tasks: []Task{
			{IP: "10.200.1.20", Ready: true, Ordinal: 0}, {IP: "10.200.2.21", Ready: true, Ordinal: 1}, {IP: "10.200.3.22", Ordinal: 2}}},
		{Namespace: "big", Name: "fleet", DNSRR: true, Tasks: many},
		{Namespace: "shop", Name: "idle", VIP: "10.201.0.9"},
	}
}

func TestBuildZone(t *testing.T) {
	z := BuildZone(testServices(), twin)
	want := map[string]Record{
		"web.shop.legion.":       {A: []string{"10.201.0.5"}},
		"tasks.web.shop.legion.": {A: []string{"10.200.1.11", "10.200.2.17"}, AAAA: []string{"fd00:10:200:1::b", "fd00:10:200:2::11"}},
		"db.shop.legion.":        {A: []string{"10.200.1.20", "10.200.2.21"}, AAAA: []string{"fd00:10:200:1::14", "fd00:10:200:2::15"}},
		"tasks.db.shop.legion.":  {A: []string{"10.200.1.20", "10.200.2.21"}, AAAA: []string{"fd00:10:200:1::14", "fd00:10:200:2::15"}},
		"db-0.db.shop.legion.":   {A: []string{"10.200.1.20"}, AAAA: []string{"fd00:10:200:1::14"}},
		"db-1.db.shop.legion.":   {A: []string{"10.200.2.21"}, AAAA: []string{"fd00:10:200:2::15"}},
		"idle.shop.legion.":      {A: []string{"10.201.0.9"}},
	}
	got := map[string]Record{}
	for k, v := range z.Records {
		if k != "fleet.big.legion." && k != "tasks.fleet.big.legion." {
			got[k] = v
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("zone (-want +got):\n%s", d)
	}
	if n := len(z.Records["tasks.fleet.big.legion."].A); n != 60 {
		t.Fatalf("fleet has %d addresses, want 60", n)
	}
}

type running struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
	zone   string
}

func start(t *testing.T, zone Zone, upstreams ...string) *running {
	t.Helper()
	return startServer(t, zone, &Server{Upstreams: upstreams})
}

// startServer serves zone with s, given its upstreams (and, for the
// cache's tests, a clock).
func startServer(t *testing.T, zone Zone, s *Server) *running {
	t.Helper()
	dir := t.TempDir()
	zf := filepath.Join(dir, "resolver", "zone.json")
	if err := WriteZone(zf, zone); err != nil {
		t.Fatal(err)
	}
	pc, l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.ZoneFile, s.PollInterval, s.ForwardTimeout = zf, 20*time.Millisecond, time.Second
	r := &running{addr: pc.LocalAddr().String(), cancel: cancel, done: make(chan error, 1), zone: zf}
	go func() { r.done <- s.Serve(ctx, pc, l) }()
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	return r
}

func query(t *testing.T, addr, network, name string, qtype uint16) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network, Timeout: 2 * time.Second, UDPSize: 0}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	var resp *dns.Msg
	var err error
	// The servers start asynchronously: retry until they answer.
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _, err = c.Exchange(m, addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("query %s %s over %s: %v", name, dns.TypeToString[qtype], network, err)
	}
	return resp
}

func addrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch r := rr.(type) {
		case *dns.A:
			out = append(out, r.A.String())
		case *dns.AAAA:
			out = append(out, r.AAAA.String())
		}
		if rr.Header().Ttl != TTL {
			out = append(out, fmt.Sprintf("ttl=%d", rr.Header().Ttl))
		}
	}
	sort.Strings(out)
	return out
}

func TestServerAnswersClusterNames(t *testing.T) {
	r := start(t, BuildZone(testServices(), twin))
	cases := []struct {
		name  string
		qtype uint16
		rcode int
		want  []string
	}{
		{"web.shop.legion.", dns.TypeA, dns.RcodeSuccess, []string{"10.201.0.5"}},
		{"WEB.Shop.legion.", dns.TypeA, dns.RcodeSuccess, []string{"10.201.0.5"}},
		{"tasks.web.shop.legion.", dns.TypeA, dns.RcodeSuccess, []string{"10.200.1.11", "10.200.2.17"}},
		{"tasks.web.shop.legion.", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00:10:200:1::b", "fd00:10:200:2::11"}},
		{"db-1.db.shop.legion.", dns.TypeA, dns.RcodeSuccess, []string{"10.200.2.21"}},
		{"db-2.db.shop.legion.", dns.TypeA, dns.RcodeNameError, nil}, // not ready
		{"nope.shop.legion.", dns.TypeA, dns.RcodeNameError, nil},
		{"shop.legion.", dns.TypeA, dns.RcodeSuccess, nil},      // an empty non-terminal: NODATA
		{"web.shop.legion.", dns.TypeMX, dns.RcodeSuccess, nil}, // the name exists, not that type
	}
	for _, c := range cases {
		m := query(t, r.addr, "udp", c.name, c.qtype)
		if m.Rcode != c.rcode || !m.Authoritative {
			t.Errorf("%s %s: rcode %s authoritative %v, want %s and authoritative", c.name, dns.TypeToString[c.qtype],
				dns.RcodeToString[m.Rcode], m.Authoritative, dns.RcodeToString[c.rcode])
		}
		if d := cmp.Diff(c.want, addrs(m)); d != "" {
			t.Errorf("%s %s (-want +got):\n%s", c.name, dns.TypeToString[c.qtype], d)
		}
		if len(m.Answer) > 0 && m.Answer[0].Header().Name != c.name {
			t.Errorf("answer named %q, asked %q", m.Answer[0].Header().Name, c.name)
		}
	}
}

// With twins, every name with A records answers AAAA with the twins of
// those same addresses.
func TestServerAnswersAAAAForEveryA(t *testing.T) {
	t.Parallel()
	// Unlike twin, this maps the VIPs too, as addrplan does.
	every := func(a netip.Addr) (netip.Addr, bool) {
		b := a.As4()
		return netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x10, 0, b[1], 0, b[2], 14: 0, 15: b[3]}), a.Is4()
	}
	z := BuildZone(testServices(), every)
	r := start(t, z)
	for name, rec := range z.Records {
		if len(rec.A) == 0 {
			continue
		}
		var want []string
		for _, a := range rec.A {
			tw, ok := every(netip.MustParseAddr(a))
			if !ok {
				t.Fatalf("%s: %s has no twin", name, a)
			}
			want = append(want, tw.String())
		}
		sort.Strings(want)
		m := query(t, r.addr, "tcp", name, dns.TypeAAAA) // tcp: the 60-task names are truncated over udp
		if m.Rcode != dns.RcodeSuccess || !m.Authoritative {
			t.Errorf("%s AAAA: rcode %s authoritative %v", name, dns.RcodeToString[m.Rcode], m.Authoritative)
		}
		if d := cmp.Diff(want, addrs(m)); d != "" {
			t.Errorf("%s AAAA (-want +got):\n%s", name, d)
		}
	}
}

// A node without IPv6 (no twins) answers AAAA for a name it serves with
// NOERROR and no records, the SOA in the authority section (NODATA, RFC
// 2308): NXDOMAIN would tell the client the name has no A either.
func TestServerAnswersNoDataForAAAAWithoutIPv6(t *testing.T) {
	t.Parallel()
	r := start(t, BuildZone(testServices(), nil))
	for _, name := range []string{"web.shop.legion.", "tasks.web.shop.legion.", "db-0.db.shop.legion."} {
		m := query(t, r.addr, "udp", name, dns.TypeAAAA)
		if m.Rcode != dns.RcodeSuccess || !m.Authoritative || len(m.Answer) != 0 {
			t.Errorf("%s AAAA: rcode %s authoritative %v answers %v, want NOERROR, authoritative, none", name,
				dns.RcodeToString[m.Rcode], m.Authoritative, m.Answer)
		}
		if len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Errorf("%s AAAA: authority %v, want the zone's SOA", name, m.Ns)
		}
		if a := query(t, r.addr, "udp", name, dns.TypeA); len(a.Answer) == 0 {
			t.Errorf("%s A: no answer, yet AAAA said the name exists", name)
		}
	}
}

func TestServerRoundRobinsAnswers(t *testing.T) {
	r := start(t, BuildZone(testServices(), twin))
	first := map[string]bool{}
	for range 6 {
		m := query(t, r.addr, "udp", "tasks.web.shop.legion.", dns.TypeA)
		first[m.Answer[0].(*dns.A).A.String()] = true
	}
	if len(first) != 2 {
		t.Fatalf("the first answer was always one of %v: want both addresses first in turn", first)
	}
}

func TestServerTruncatesLargeUDPAnswers(t *testing.T) {
	r := start(t, BuildZone(testServices(), twin))
	udp := query(t, r.addr, "udp", "tasks.fleet.big.legion.", dns.TypeA)
	if !udp.Truncated || len(udp.Answer) >= 60 {
		t.Fatalf("UDP answer: truncated %v with %d records, want truncated with fewer than 60", udp.Truncated, len(udp.Answer))
	}
	tcp := query(t, r.addr, "tcp", "tasks.fleet.big.legion.", dns.TypeA)
	if tcp.Truncated || len(tcp.Answer) != 60 {
		t.Fatalf("TCP answer: truncated %v with %d records, want all 60", tcp.Truncated, len(tcp.Answer))
	}
}

func TestServerForwardsOtherNames(t *testing.T) {
	// A real upstream DNS server on loopback answering example.org.
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc("example.org.", func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 7)})
		w.WriteMsg(m)
	})
	up := &dns.Server{PacketConn: pc, Handler: mux}
	go up.ActivateAndServe()
	defer up.Shutdown()

	// The first upstream is dead: the resolver goes on to the next.
	dead, _ := net.ListenPacket("udp", "127.0.0.1:0")
	deadAddr := dead.LocalAddr().String()
	dead.Close()
	r := start(t, BuildZone(testServices(), twin), deadAddr, pc.LocalAddr().String())
	m := query(t, r.addr, "udp", "www.example.org.", dns.TypeA)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.7" || m.Authoritative {
		t.Fatalf("forwarded answer: %v", m)
	}
	// No upstream at all: SERVFAIL, and legion. names still answer.
	r2 := start(t, BuildZone(testServices(), twin))
	if m := query(t, r2.addr, "udp", "www.example.org.", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("without upstreams: %s", dns.RcodeToString[m.Rcode])
	}
}

func TestServerReloadsAndStopsWhenTheZoneGoes(t *testing.T) {
	r := start(t, BuildZone(testServices(), twin))
	if m := query(t, r.addr, "udp", "new.shop.legion.", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Fatalf("before: %s", dns.RcodeToString[m.Rcode])
	}
	svcs := append(testServices(), Service{Namespace: "shop", Name: "new", VIP: "10.201.0.77"})
	if err := WriteZone(r.zone, BuildZone(svcs, twin)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		m := query(t, r.addr, "udp", "new.shop.legion.", dns.TypeA)
		if m.Rcode == dns.RcodeSuccess && len(addrs(m)) == 1 && addrs(m)[0] == "10.201.0.77" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the new zone was not picked up: %v", m)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := os.Remove(r.zone); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		r.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("stopped with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not stop once its zone file was gone")
	}
}

func TestReadZoneRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"outside.json": `{"records":{"web.example.org.":{"a":["10.0.0.1"]}}}`,
		"upper.json":   `{"records":{"Web.shop.legion.":{"a":["10.0.0.1"]}}}`,
		"addr.json":    `{"records":{"web.shop.legion.":{"a":["10.0.0.300"]}}}`,
	} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := ReadZone(p); err == nil {
			t.Errorf("%s was accepted", name)
		}
	}
	p := filepath.Join(dir, "resolv.conf")
	os.WriteFile(p, []byte("nameserver 10.200.3.1\nnameserver 192.0.2.53\n"), 0o644)
	ups, err := HostUpstreams(p, "10.200.3.1:53")
	if err != nil || len(ups) != 1 || ups[0] != "192.0.2.53:53" {
		t.Fatalf("HostUpstreams = %v, %v", ups, err)
	}
}

func TestReloadKeepsTheLastGoodZone(t *testing.T) {
	zf := filepath.Join(t.TempDir(), "zone.json")
	if err := WriteZone(zf, BuildZone(testServices(), twin)); err != nil {
		t.Fatal(err)
	}
	s := &Server{ZoneFile: zf}
	if err := s.reload(); err != nil {
		t.Fatal(err)
	}
	before := s.zone.Load()
	if err := os.WriteFile(zf, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.reload(); err == nil {
		t.Fatal("a broken zone file was read without error")
	}
	if s.zone.Load() != before || len(before.names["web.shop.legion."].a) != 1 {
		t.Fatal("a broken zone file replaced the last good zone")
	}
	os.Remove(zf)
	if err := s.reload(); err != errZoneGone {
		t.Fatalf("a missing zone file: %v, want errZoneGone", err)
	}
}

// A resolver also stops once a watched path (its node's data directory)
// is gone.
func TestServerStopsWhenAWatchedPathGoes(t *testing.T) {
	dir := t.TempDir()
	zf := filepath.Join(dir, "zone.json")
	if err := WriteZone(zf, BuildZone(testServices(), twin)); err != nil {
		t.Fatal(err)
	}
	watched := filepath.Join(dir, "data")
	os.Mkdir(watched, 0o755)
	pc, l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{ZoneFile: zf, PollInterval: 10 * time.Millisecond, Watch: []string{watched}}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), pc, l) }()
	query(t, pc.LocalAddr().String(), "udp", "web.shop.legion.", dns.TypeA)
	os.Remove(watched)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not stop once its watched path was gone")
	}
}

// A resolver stops once its address is on no interface (its bridge
// destroyed), and not while a loopback interface's network holds it.
func TestServerStopsWhenItsAddressGoes(t *testing.T) {
	zf := filepath.Join(t.TempDir(), "zone.json")
	if err := WriteZone(zf, BuildZone(testServices(), twin)); err != nil {
		t.Fatal(err)
	}
	pc, l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var gone atomic.Bool
	var listed atomic.Int32
	addrs := func() ([]net.Addr, error) {
		listed.Add(1)
		out := []net.Addr{&net.IPNet{IP: net.ParseIP("192.0.2.1"), Mask: net.CIDRMask(24, 32)}}
		if !gone.Load() {
			// As Linux lists lo: 127.0.0.1/8 holds the address served.
			out = append(out, &net.IPNet{IP: net.ParseIP("127.0.0.1").To4(), Mask: net.CIDRMask(8, 32)})
		}
		return out, nil
	}
	s := &Server{ZoneFile: zf, PollInterval: 10 * time.Millisecond, InterfaceAddrs: addrs}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), pc, l) }()
	for listed.Load() < 5 {
		select {
		case err := <-done:
			t.Fatalf("the server stopped with its address on an interface: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	query(t, pc.LocalAddr().String(), "udp", "web.shop.legion.", dns.TypeA)
	gone.Store(true)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not stop once its address was on no interface")
	}
}

// Which listings hold the address served: the address itself, or a
// loopback network holding a loopback address; a failed listing stops
// nothing.
func TestAddrMissed(t *testing.T) {
	ipnet := func(cidr string) net.Addr {
		ip, n, _ := net.ParseCIDR(cidr)
		n.IP = ip
		return n
	}
	for _, c := range []struct {
		ip    string
		addrs []net.Addr
		err   error
		want  int
	}{
		{"10.226.0.1", []net.Addr{ipnet("127.0.0.1/8"), ipnet("10.226.0.1/16")}, nil, 0},
		{"10.226.0.1", []net.Addr{ipnet("127.0.0.1/8"), ipnet("10.226.0.2/16")}, nil, 2},
		{"127.226.0.1", []net.Addr{ipnet("127.0.0.1/8")}, nil, 0},
		{"127.226.0.1", []net.Addr{ipnet("127.0.0.1/32")}, nil, 2},
		{"10.226.0.1", nil, fmt.Errorf("no netlink"), 0},
		{"fd00::1", []net.Addr{ipnet("fd00::1/64")}, nil, 0},
	} {
		s := &Server{InterfaceAddrs: func() ([]net.Addr, error) { return c.addrs, c.err }, Logger: slog.New(slog.DiscardHandler)}
		if got := s.addrMissed(netip.MustParseAddr(c.ip), 1); got != c.want {
			t.Errorf("%s on %v (%v): missed %d, want %d", c.ip, c.addrs, c.err, got, c.want)
		}
	}
}

// A server stopped as soon as it starts stops: miekg/dns refuses a
// shutdown that comes before it started, and would then serve for good.
func TestServerStoppedAtOnceStops(t *testing.T) {
	zf := filepath.Join(t.TempDir(), "zone.json")
	if err := WriteZone(zf, Zone{Records: map[string]Record{}}); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		pc, l, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		done := make(chan error, 1)
		go func() { done <- (&Server{ZoneFile: zf, Upstreams: []string{}}).Serve(ctx, pc, l) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("a server cancelled before it started is still serving after 10 s")
		}
	}
}

// The UDP loop answers what miekg/dns's server did: NOTIMP for opcodes
// other than QUERY, FORMERR for more than one question.
func TestServerRefusesOtherOpcodesAndQuestions(t *testing.T) {
	r := start(t, BuildZone(testServices(), twin))
	query(t, r.addr, "udp", "web.shop.legion.", dns.TypeA) // started
	c := &dns.Client{Timeout: 2 * time.Second}
	update := new(dns.Msg)
	update.SetUpdate("shop.legion.")
	if m, _, err := c.Exchange(update, r.addr); err != nil || m.Rcode != dns.RcodeNotImplemented {
		t.Fatalf("UPDATE: %v, %v; want NOTIMP", m, err)
	}
	two := new(dns.Msg)
	two.SetQuestion("web.shop.legion.", dns.TypeA)
	two.Question = append(two.Question, dns.Question{Name: "db.shop.legion.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	if m, _, err := c.Exchange(two, r.addr); err != nil || m.Rcode != dns.RcodeFormatError {
		t.Fatalf("two questions: %v, %v; want FORMERR", m, err)
	}
}

// With more than one CPU the resolver reads UDP from one socket per CPU
// on its one address: clients from many ports, which the kernel spreads
// over the sockets, are all answered.
func TestServerAnswersOnEveryUDPSocket(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one CPU: one UDP socket")
	}
	r := start(t, BuildZone(testServices(), twin))
	query(t, r.addr, "udp", "web.shop.legion.", dns.TypeA) // started
	for i := range 64 {
		c := &dns.Client{Timeout: 2 * time.Second} // a new socket, a new port, each time
		m := new(dns.Msg)
		m.SetQuestion("web.shop.legion.", dns.TypeA)
		if resp, _, err := c.Exchange(m, r.addr); err != nil || len(resp.Answer) != 1 {
			t.Fatalf("client %d: %v, %v", i, resp, err)
		}
	}
}

// The UDP sockets share their address with each other, yet a second
// resolver on an address in use is refused, as before.
func TestListenRefusesAnAddressInUse(t *testing.T) {
	r := start(t, BuildZone(testServices(), twin))
	query(t, r.addr, "udp", "web.shop.legion.", dns.TypeA) // started
	pc, l, err := Listen(r.addr)
	if err == nil {
		pc.Close()
		l.Close()
		t.Fatalf("a second resolver could listen on %s", r.addr)
	}
}

// The loop that reads one datagram per system call (FreeBSD's; Linux
// reads in batches) answers alike: cluster names, truncation, forwarding.
func TestServerAnswersOneDatagramAtATime(t *testing.T) {
	u := startUpstream(t)
	s := &Server{Upstreams: []string{u.addr}, oneByOne: true}
	r := startServer(t, BuildZone(testServices(), twin), s)
	if m := query(t, r.addr, "udp", "web.shop.legion.", dns.TypeA); len(addrs(m)) != 1 || addrs(m)[0] != "10.201.0.5" {
		t.Fatalf("web.shop.legion.: %v", m)
	}
	if m := query(t, r.addr, "udp", "nope.shop.legion.", dns.TypeA); m.Rcode != dns.RcodeNameError {
		t.Fatalf("nope.shop.legion.: %v", m)
	}
	if m := query(t, r.addr, "udp", "tasks.fleet.big.legion.", dns.TypeA); !m.Truncated || len(m.Answer) >= 60 {
		t.Fatalf("tasks.fleet.big.legion.: truncated %v with %d records, want truncated", m.Truncated, len(m.Answer))
	}
	for range 2 {
		if m := query(t, r.addr, "udp", "a.example.org.", dns.TypeA); len(m.Answer) != 1 {
			t.Fatalf("a.example.org.: %v", m)
		}
	}
	if n := u.count("a.example.org."); n != 1 {
		t.Fatalf("the upstream was asked %d times, want once", n)
	}
}

// A resolver says its build to version.bind in the CHAOS class, so a
// daemon of another build knows to replace it; other CHAOS questions are
// refused, not forwarded, and one without a build refuses them all.
func TestServerAnswersItsBuild(t *testing.T) {
	r := startServer(t, BuildZone(testServices(), twin), &Server{Build: "0.1.0 abc123"})
	query(t, r.addr, "udp", "web.shop.legion.", dns.TypeA) // started
	if got := BuildAt(r.addr); got != "0.1.0 abc123" {
		t.Errorf("BuildAt: %q, want the server's build", got)
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	other := new(dns.Msg)
	other.SetQuestion("hostname.bind.", dns.TypeTXT)
	other.Question[0].Qclass = dns.ClassCHAOS
	if m, _, err := c.Exchange(other, r.addr); err != nil || m.Rcode != dns.RcodeRefused {
		t.Errorf("hostname.bind: %v, %v; want REFUSED", m, err)
	}
	none := startServer(t, BuildZone(testServices(), twin), &Server{})
	query(t, none.addr, "udp", "web.shop.legion.", dns.TypeA)
	if got := BuildAt(none.addr); got != "" {
		t.Errorf("BuildAt of a server with no build: %q, want none", got)
	}
}
