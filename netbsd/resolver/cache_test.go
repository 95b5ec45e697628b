package resolver

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// clock is a time the test moves by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// upstream is a real DNS server on loopback that counts the questions it
// gets per name: a.example.org. has an A record with a TTL of 300 s,
// gone.example.org. does not exist (SOA TTL 60, minimum 30), anything
// else gets SERVFAIL. It speaks EDNS to clients that do.
type upstream struct {
	addr  string
	mu    sync.Mutex
	asked map[string]int
	ids   map[uint16]bool
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	u := &upstream{asked: map[string]int{}, ids: map[uint16]bool{}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u.addr = pc.LocalAddr().String()
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) }, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		name := strings.ToLower(req.Question[0].Name)
		u.mu.Lock()
		u.asked[name]++
		u.ids[req.Id] = true
		u.mu.Unlock()
		m := new(dns.Msg)
		m.SetReply(req)
		switch name {
		case "a.example.org.":
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: net.IPv4(192, 0, 2, 7)})
		case "gone.example.org.":
			m.Rcode = dns.RcodeNameError
			m.Ns = append(m.Ns, &dns.SOA{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
				Ns: "ns.example.org.", Mbox: "h.example.org.", Serial: 1, Refresh: 60, Retry: 60, Expire: 60, Minttl: 30})
		default:
			m.Rcode = dns.RcodeServerFailure
		}
		if opt := req.IsEdns0(); opt != nil {
			m.SetEdns0(1232, opt.Do()) // as real servers do
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	<-started
	t.Cleanup(func() { srv.Shutdown() })
	return u
}

func (u *upstream) count(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.asked[name]
}

// startCaching serves the test zone forwarding to u, with the cache on
// the given clock.
func startCaching(t *testing.T, u *upstream, c *clock) *running {
	s := &Server{Upstreams: []string{u.addr}}
	s.init()
	s.cache.now = c.now
	return startServer(t, BuildZone(testServices(), twin), s)
}

// An outside name asked again within its TTL is answered from the cache,
// the TTL counting down, and asked upstream again once it has run out.
func TestServerCachesUpstreamAnswers(t *testing.T) {
	u := startUpstream(t)
	c := &clock{t: time.Unix(1_000_000, 0)}
	r := startCaching(t, u, c)

	ttl := func(m *dns.Msg) uint32 {
		t.Helper()
		if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.7" {
			t.Fatalf("answer: %v", m)
		}
		return m.Answer[0].Header().Ttl
	}
	if got := ttl(query(t, r.addr, "udp", "a.example.org.", dns.TypeA)); got != 300 {
		t.Fatalf("first answer's TTL %d, want 300", got)
	}
	c.add(100 * time.Second)
	// Over TCP and in another case: the same question to the cache.
	m := query(t, r.addr, "tcp", "A.Example.ORG.", dns.TypeA)
	if got := ttl(m); got != 200 {
		t.Fatalf("cached answer's TTL %d, want 200 (300 less the 100 s it was kept)", got)
	}
	if m.Question[0].Name != "A.Example.ORG." || m.Authoritative {
		t.Fatalf("cached answer: question %v authoritative %v, want the name as asked and not authoritative", m.Question, m.Authoritative)
	}
	if n := u.count("a.example.org."); n != 1 {
		t.Fatalf("the upstream was asked %d times within the TTL, want once", n)
	}
	c.add(200 * time.Second)
	if got := ttl(query(t, r.addr, "udp", "a.example.org.", dns.TypeA)); got != 300 {
		t.Fatalf("after the TTL: TTL %d, want a fresh 300", got)
	}
	if n := u.count("a.example.org."); n != 2 {
		t.Fatalf("the upstream was asked %d times, want again once the TTL ran out", n)
	}
}

// NXDOMAIN is kept for the SOA's minimum (RFC 2308); SERVFAIL is not kept.
func TestServerCachesNegativeAnswersNotFailures(t *testing.T) {
	u := startUpstream(t)
	c := &clock{t: time.Unix(1_000_000, 0)}
	r := startCaching(t, u, c)
	for range 2 {
		if m := query(t, r.addr, "udp", "gone.example.org.", dns.TypeA); m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 {
			t.Fatalf("gone.example.org.: %v", m)
		}
		if m := query(t, r.addr, "udp", "broken.example.org.", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
			t.Fatalf("broken.example.org.: %v", m)
		}
	}
	if n := u.count("gone.example.org."); n != 1 {
		t.Fatalf("NXDOMAIN asked upstream %d times, want once", n)
	}
	if n := u.count("broken.example.org."); n != 2 {
		t.Fatalf("SERVFAIL asked upstream %d times, want every time", n)
	}
	c.add(30 * time.Second)
	query(t, r.addr, "udp", "gone.example.org.", dns.TypeA)
	if n := u.count("gone.example.org."); n != 2 {
		t.Fatalf("NXDOMAIN asked upstream %d times after the SOA minimum, want twice", n)
	}
}

// The upstream never sees the client's query ID (the answer is kept for
// everyone, so its ID must not be one a client picked), and the client
// gets its own back.
func TestServerAsksUpstreamWithItsOwnID(t *testing.T) {
	u := startUpstream(t)
	r := startCaching(t, u, &clock{t: time.Unix(1_000_000, 0)})
	const id = 4242
	m := new(dns.Msg)
	m.SetQuestion("a.example.org.", dns.TypeA)
	m.Id = id
	c := &dns.Client{Timeout: 2 * time.Second}
	resp, _, err := c.Exchange(m, r.addr)
	if err != nil || resp.Id != id {
		t.Fatalf("answer %v, %v: want ID %d", resp, err, id)
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ids[id] {
		t.Fatalf("the upstream was asked with the client's ID %d", id)
	}
}

// Questions asked while the same one is on its way upstream wait for its
// answer instead of asking again.
func TestFlightAsksOnceForConcurrentQuestions(t *testing.T) {
	c := newForwardCache(10, cacheBytes)
	k := cacheKey{name: "a.example.org.", qtype: dns.TypeA, qclass: dns.ClassINET}
	release := make(chan struct{})
	var asked atomic.Int32
	ask := func() *dns.Msg {
		asked.Add(1)
		<-release
		m := new(dns.Msg)
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	const n = 5
	var wg sync.WaitGroup
	results := make(chan *dns.Msg, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- c.flight(k, false, ask)
		}()
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		c.mu.Lock()
		w := c.waiting
		c.mu.Unlock()
		if w == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d questions waiting, want %d (asked upstream %d times)", w, n-1, asked.Load())
		}
	}
	close(release)
	wg.Wait()
	close(results)
	var first *dns.Msg
	for m := range results {
		if first == nil {
			first = m
		} else if m != first {
			t.Fatal("the questions got different answers")
		}
	}
	if a := asked.Load(); a != 1 {
		t.Fatalf("asked upstream %d times, want once", a)
	}
	// Over TCP it is another flight: a UDP answer may be truncated.
	if c.flight(k, true, func() *dns.Msg { asked.Add(1); return nil }); asked.Load() != 2 {
		t.Fatal("a TCP question waited for a UDP one's answer")
	}
}

func TestCacheTTL(t *testing.T) {
	a := func(ttl uint32) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IPv4(192, 0, 2, 1)}
	}
	soa := &dns.SOA{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60}, Minttl: 20}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	cases := []struct {
		m    dns.Msg
		want time.Duration // 0: not kept
	}{
		{dns.Msg{Answer: []dns.RR{a(300), a(120)}, Extra: []dns.RR{opt}}, 120 * time.Second},
		{dns.Msg{Answer: []dns.RR{a(86400 * 7)}}, maxCacheTTL},
		{dns.Msg{Answer: []dns.RR{a(0)}}, 0},
		{dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}, Ns: []dns.RR{soa}}, 20 * time.Second},
		{dns.Msg{Ns: []dns.RR{soa}}, 20 * time.Second}, // NODATA
		{dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeNameError}}, 0},
		{dns.Msg{}, 0},
		{dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeServerFailure}, Answer: []dns.RR{a(300)}}, 0},
		{dns.Msg{MsgHdr: dns.MsgHdr{Truncated: true}, Answer: []dns.RR{a(300)}}, 0},
	}
	for i, c := range cases {
		got, ok := cacheTTL(&c.m)
		if ok != (c.want != 0) || got != c.want {
			t.Errorf("case %d: %v %v, want %v", i, got, ok, c.want)
		}
	}
}

// A full cache makes room: the expired entries go first, then others,
// and it never holds more than its bound.
func TestCacheStaysBounded(t *testing.T) {
	c := newForwardCache(20, cacheBytes)
	clk := &clock{t: time.Unix(1_000_000, 0)}
	c.now = clk.now
	answer := func(ttl uint32) func() *dns.Msg {
		return func() *dns.Msg {
			return &dns.Msg{Answer: []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IPv4(192, 0, 2, 1)}}}
		}
	}
	for i := range 10 {
		c.flight(cacheKey{name: fmt.Sprintf("short%d.", i)}, false, answer(5))
	}
	clk.add(10 * time.Second)
	for i := range 100 {
		c.flight(cacheKey{name: fmt.Sprintf("long%d.", i)}, false, answer(300))
		if len(c.entries) > 20 {
			t.Fatalf("%d entries, bound 20", len(c.entries))
		}
	}
	for k := range c.entries {
		if strings.HasPrefix(k.name, "short") {
			t.Fatalf("%s expired and is still kept while others were dropped", k.name)
		}
	}
}

// A client speaking EDNS gets an OPT record back, from the upstream or
// the cache, and the room it offers over UDP; one that does not gets
// neither, even after an EDNS client's answer was kept.
func TestServerKeepsEDNSApart(t *testing.T) {
	u := startUpstream(t)
	r := startCaching(t, u, &clock{t: time.Unix(1_000_000, 0)})
	ask := func(name string, edns bool) *dns.Msg {
		t.Helper()
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		if edns {
			m.SetEdns0(4096, false)
		}
		c := &dns.Client{Timeout: 2 * time.Second, UDPSize: 4096}
		resp, _, err := c.Exchange(m, r.addr)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	query(t, r.addr, "udp", "web.shop.legion.", dns.TypeA) // started
	for i, edns := range []bool{true, true, false} {
		m := ask("a.example.org.", edns)
		if len(m.Answer) != 1 || (m.IsEdns0() != nil) != edns {
			t.Fatalf("question %d (EDNS %v): %d answers, OPT %v", i, edns, len(m.Answer), m.IsEdns0())
		}
	}
	if n := u.count("a.example.org."); n != 2 {
		t.Fatalf("the upstream was asked %d times, want once with EDNS and once without", n)
	}
	if m := ask("tasks.fleet.big.legion.", true); m.Truncated || len(m.Answer) != 60 {
		t.Fatalf("60 addresses with 4096 bytes offered: truncated %v with %d records", m.Truncated, len(m.Answer))
	}
}

// The answers kept add up to no more than the cache's byte budget, and
// an answer too large for it is not kept at all.
func TestCacheStaysWithinItsBytes(t *testing.T) {
	c := newForwardCache(1000, 16<<10) // one answer: at most 1 KiB
	txt := func(n int) func() *dns.Msg {
		return func() *dns.Msg {
			return &dns.Msg{Answer: []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: "t.example.org.", Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300},
				Txt: []string{strings.Repeat("x", n)}}}}
		}
	}
	for i := range 200 {
		c.flight(cacheKey{name: fmt.Sprintf("t%d.example.org.", i)}, false, txt(200))
		sum := 0
		for _, e := range c.entries {
			sum += e.size
		}
		if sum != c.bytes || c.bytes > 16<<10 {
			t.Fatalf("after %d answers: %d bytes kept (counted %d), budget %d", i+1, sum, c.bytes, 16<<10)
		}
	}
	if len(c.entries) < 40 {
		t.Fatalf("%d answers kept: the budget holds about 60", len(c.entries))
	}
	c.flight(cacheKey{name: "big.example.org."}, false, txt(2000))
	if c.entries[cacheKey{name: "big.example.org."}] != nil {
		t.Fatal("an answer over a sixteenth of the budget was kept")
	}
}
