package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// TTL is the time to live of every cluster answer, in seconds.
const TTL = 5

// Server answers DNS over UDP and TCP on one address.
//
// UDP queries are read by one loop per socket that answers cluster names
// and cached upstream answers itself, reusing its buffers and messages,
// so a query costs a read, a lookup and a write: no goroutine, no timer.
// Only a name that must go upstream gets a goroutine of its own. TCP goes
// through miekg/dns's server (ServeDNS).
type Server struct {
	// ZoneFile is read at start and again whenever it changes; once it is
	// gone the server stops.
	ZoneFile string
	// Upstreams are host:port resolvers for names outside the zone, tried
	// in order. None: such names get SERVFAIL.
	Upstreams []string
	// PollInterval is how often the zone file is checked (default 1s).
	PollInterval time.Duration
	// ForwardTimeout bounds one upstream exchange (default 2s).
	ForwardTimeout time.Duration
	// Watch lists more paths whose removal stops the server, as the zone
	// file's does (the node's data directory: a node removed from the
	// host takes its resolver along).
	Watch []string
	// InterfaceAddrs lists the host's interface addresses (default
	// net.InterfaceAddrs): once the listening address is on none of them
	// (its bridge destroyed), the server stops, as it does without its
	// zone file.
	InterfaceAddrs func() ([]net.Addr, error)
	Logger         *slog.Logger
	// Build names the build of Legion serving, answered to version.bind
	// in the CHAOS class, so that a daemon of another build (an upgrade)
	// knows to replace this process. Empty: CHAOS questions are refused.
	Build string

	zone    atomic.Pointer[compiledZone]
	rotate  atomic.Uint32
	initOne sync.Once
	cache   *forwardCache
	// forwards counts the goroutines answering from upstream, so Serve
	// returns only once they are done.
	forwards sync.WaitGroup
	// oneByOne reads and writes a datagram per system call even where
	// batches are possible (tests: FreeBSD's way, on Linux).
	oneByOne bool
}

type compiledZone struct {
	// names holds every name of the zone and its parents under Domain
	// (empty non-terminals, with no records).
	names map[string]*zoneName
	stamp fileStamp
}

type zoneName struct {
	a, aaaa []dns.RR
}

type fileStamp struct {
	mod  time.Time
	size int64
}

var errZoneGone = errors.New("zone file removed")

func (s *Server) init() {
	s.initOne.Do(func() {
		if s.Logger == nil {
			s.Logger = slog.New(slog.DiscardHandler)
		}
		if s.PollInterval == 0 {
			s.PollInterval = time.Second
		}
		if s.ForwardTimeout == 0 {
			s.ForwardTimeout = 2 * time.Second
		}
		if s.InterfaceAddrs == nil {
			s.InterfaceAddrs = net.InterfaceAddrs
		}
		s.cache = newForwardCache(cacheEntries, cacheBytes)
	})
}

// Serve answers on the given UDP connection and TCP listener until ctx is
// done, the zone file or a watched path goes away, or the listening
// address is on no interface. It closes both when it returns. When
// the UDP socket came from Listen, Serve opens one more socket on the
// same address for each further CPU Go may use (SO_REUSEPORT on Linux,
// SO_REUSEPORT_LB on FreeBSD: the kernel spreads clients over them), each
// with its own loop.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	s.init()
	if err := s.reload(); err != nil {
		pc.Close()
		l.Close()
		return err
	}
	conns := []net.PacketConn{pc}
	if u, ok := pc.(*net.UDPConn); ok && isReusePort(u) {
		for range min(runtime.GOMAXPROCS(0), maxUDPSockets) - 1 {
			more, err := listenUDP(u.LocalAddr().String())
			if err != nil {
				s.Logger.Debug("one UDP socket only", "err", err)
				break
			}
			conns = append(conns, more)
		}
	}
	// miekg/dns refuses a Shutdown that comes before the server started
	// ("server not started") and the server then serves on for good: a
	// stop right after the start waits for it to have started.
	started := make(chan struct{}, 1)
	tcp := &dns.Server{Listener: l, Handler: s, NotifyStartedFunc: func() { started <- struct{}{} }}
	var wg sync.WaitGroup
	errs := make(chan error, 1+len(conns))
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := tcp.ActivateAndServe(); err != nil {
			errs <- err
			started <- struct{}{} // it will not start: do not wait for it
		}
	}()
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.serveUDP(c); err != nil {
				errs <- err
			}
		}()
	}
	<-started
	ticker := time.NewTicker(s.PollInterval)
	defer ticker.Stop()
	var result error
	listening := listenIP(l.Addr())
	missed := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case err := <-errs:
			result = err
			break loop
		case <-ticker.C:
			if gone := s.watchedGone(); gone != "" {
				s.Logger.Info("watched path gone, stopping", "path", gone)
				break loop
			}
			// Twice in a row, so that one odd listing stops nothing.
			if missed = s.addrMissed(listening, missed); missed >= 2 {
				s.Logger.Info("listening address on no interface, stopping", "addr", listening)
				break loop
			}
			if err := s.reload(); err != nil {
				if errors.Is(err, errZoneGone) {
					s.Logger.Info("zone file gone, stopping", "zone", s.ZoneFile)
					break loop
				}
				s.Logger.Warn("zone file not reloaded, keeping the last one", "err", err)
			}
		}
	}
	for _, c := range conns {
		c.Close()
	}
	tcp.Shutdown()
	wg.Wait()
	s.forwards.Wait()
	return result
}

// listenIP is the address a listener is bound to, or an invalid one for
// a wildcard (then no interface is watched).
func listenIP(a net.Addr) netip.Addr {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	ip, ok := netip.AddrFromSlice(t.IP)
	if !ok || ip.Unmap().IsUnspecified() {
		return netip.Addr{}
	}
	return ip.Unmap()
}

// addrMissed counts the polls in a row that found ip on no interface: a
// listing that fails counts as found. A loopback address counts as on a
// loopback interface whose network holds it (Linux answers all of
// 127/8 on lo, which lists 127.0.0.1/8 only).
func (s *Server) addrMissed(ip netip.Addr, missed int) int {
	if !ip.IsValid() {
		return 0
	}
	addrs, err := s.InterfaceAddrs()
	if err != nil {
		s.Logger.Debug("listing interface addresses", "err", err)
		return 0
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		have, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		if have = have.Unmap(); have == ip {
			return 0
		}
		if ip.IsLoopback() && have.IsLoopback() {
			if ones, _ := n.Mask.Size(); netip.PrefixFrom(have, ones).Masked().Contains(ip) {
				return 0
			}
		}
	}
	return missed + 1
}

func (s *Server) watchedGone() string {
	for _, p := range s.Watch {
		if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
			return p
		}
	}
	return ""
}

// reload reads the zone file if it changed since last read.
func (s *Server) reload() error {
	info, err := os.Stat(s.ZoneFile)
	if errors.Is(err, os.ErrNotExist) {
		return errZoneGone
	}
	if err != nil {
		return err
	}
	stamp := fileStamp{info.ModTime(), info.Size()}
	if cur := s.zone.Load(); cur != nil && cur.stamp == stamp {
		return nil
	}
	z, err := ReadZone(s.ZoneFile)
	if errors.Is(err, os.ErrNotExist) {
		return errZoneGone
	}
	if err != nil {
		return err
	}
	s.zone.Store(compile(z, stamp))
	return nil
}

func compile(z Zone, stamp fileStamp) *compiledZone {
	c := &compiledZone{names: map[string]*zoneName{}, stamp: stamp}
	for name, r := range z.Records {
		// Every parent of a name exists too (empty non-terminals answer
		// NODATA, not NXDOMAIN).
		for p := name; ; {
			i := strings.IndexByte(p, '.')
			if i < 0 || p[i+1:] == Domain || p[i+1:] == "" {
				break
			}
			p = p[i+1:]
			if c.names[p] == nil {
				c.names[p] = &zoneName{}
			}
		}
		n := c.names[name]
		if n == nil {
			n = &zoneName{}
			c.names[name] = n
		}
		hdr := func(t uint16) dns.RR_Header {
			return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
		}
		for _, ip := range r.A {
			a, _ := netip.ParseAddr(ip)
			n.a = append(n.a, &dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()})
		}
		for _, ip := range r.AAAA {
			a, _ := netip.ParseAddr(ip)
			n.aaaa = append(n.aaaa, &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return c
}

var soa = &dns.SOA{
	Hdr: dns.RR_Header{Name: Domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
	Ns:  "ns." + Domain, Mbox: "hostmaster." + Domain, Serial: 1, Refresh: TTL, Retry: TTL, Expire: TTL, Minttl: TTL,
}

// setReply makes m, a message that may have served before, the empty
// reply to req: what (*dns.Msg).SetReply does, keeping m's slices.
func setReply(m, req *dns.Msg) {
	m.MsgHdr = dns.MsgHdr{Id: req.Id, Response: true, Opcode: req.Opcode}
	if req.Opcode == dns.OpcodeQuery {
		m.RecursionDesired, m.CheckingDisabled = req.RecursionDesired, req.CheckingDisabled
	}
	m.Compress = false
	m.Question = append(m.Question[:0], req.Question...)
	clear(m.Answer)
	clear(m.Ns)
	clear(m.Extra)
	m.Answer, m.Ns, m.Extra = m.Answer[:0], m.Ns[:0], m.Extra[:0]
}

// respond makes m the reply to req from the zone or from the cache of
// upstream answers. It returns false when neither has it: the name is to
// be asked upstream (forward).
func (s *Server) respond(m, req *dns.Msg) bool {
	setReply(m, req)
	switch {
	case req.Opcode != dns.OpcodeQuery:
		m.Rcode = dns.RcodeNotImplemented
		return true
	case len(req.Question) != 1 || len(req.Answer) > 1 || len(req.Ns) > 1 || len(req.Extra) > 2:
		m.Question = m.Question[:min(len(m.Question), 1)]
		m.Rcode = dns.RcodeFormatError
		return true
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if q.Qclass == dns.ClassCHAOS {
		s.respondChaos(m, q, name)
		return true
	}
	if name != Domain && !strings.HasSuffix(name, "."+Domain) {
		return s.cache.respond(m, req, keyOf(req, name))
	}
	m.Authoritative = true
	z := s.zone.Load()
	n := z.names[name]
	switch {
	case name == Domain:
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, soa)
		} else {
			m.Ns = append(m.Ns, soa)
		}
	case n == nil:
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, soa)
	default:
		if q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY {
			m.Answer = s.appendRotated(m.Answer, n.a)
		}
		if q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY {
			m.Answer = s.appendRotated(m.Answer, n.aaaa)
		}
		if len(m.Answer) == 0 {
			m.Ns = append(m.Ns, soa)
		}
	}
	if q.Name != name {
		// Answer with the name as asked (case kept), as resolvers expect;
		// the compiled records are shared, so copy them first.
		for i := range m.Answer {
			rr := dns.Copy(m.Answer[i])
			rr.Header().Name = q.Name
			m.Answer[i] = rr
		}
	}
	return true
}

// respondChaos answers a CHAOS question: version.bind (BIND's name for
// a server's version) with the build; anything else is refused, never
// forwarded.
func (s *Server) respondChaos(m *dns.Msg, q dns.Question, name string) {
	if name != VersionName || s.Build == "" || q.Qtype != dns.TypeTXT && q.Qtype != dns.TypeANY {
		m.Rcode = dns.RcodeRefused
		return
	}
	m.Authoritative = true
	m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS}, Txt: []string{s.Build}})
}

// PidFile is where the resolver serving zone writes its process id.
func PidFile(zone string) string { return filepath.Join(filepath.Dir(zone), "resolver.pid") }

// VersionName is where a node resolver says its build (CHAOS TXT).
const VersionName = "version.bind."

// BuildAt asks the resolver at addr which build of Legion serves there:
// "" when none says (not a resolver of Legion's, or one from before
// builds were answered).
func BuildAt(addr string) string {
	c := &dns.Client{Net: "udp", Timeout: 300 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(VersionName, dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassCHAOS
	r, _, err := c.Exchange(m, addr)
	if err != nil || !r.Authoritative || len(r.Answer) != 1 {
		return ""
	}
	if txt, ok := r.Answer[0].(*dns.TXT); ok && len(txt.Txt) == 1 {
		return txt.Txt[0]
	}
	return ""
}

// ServeDNS implements dns.Handler; the server's TCP connections come
// here.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	s.init()
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	m := new(dns.Msg)
	if !s.respond(m, req) {
		s.forward(m, req, udp)
	}
	if udp {
		m.Truncate(udpSize(req))
	}
	w.WriteMsg(m)
}

// udpSize is how large a UDP answer to req may be.
func udpSize(req *dns.Msg) int {
	if opt := req.IsEdns0(); opt != nil {
		return max(int(opt.UDPSize()), dns.MinMsgSize)
	}
	return dns.MinMsgSize
}

// appendRotated appends the list starting at a different record each
// time, so clients that take the first address spread over all of them.
func (s *Server) appendRotated(dst, rrs []dns.RR) []dns.RR {
	if len(rrs) < 2 {
		return append(dst, rrs...)
	}
	k := int(s.rotate.Add(1)) % len(rrs)
	return append(append(dst, rrs[k:]...), rrs[:k]...)
}

// forward makes m the answer of the upstream resolvers to req, asked in
// order, and keeps it for the next ones to ask (forwardCache); none
// answering is SERVFAIL. Questions for a name already on its way
// upstream wait for that answer rather than asking again.
func (s *Server) forward(m, req *dns.Msg, udp bool) {
	key := keyOf(req, strings.ToLower(req.Question[0].Name))
	resp := s.cache.flight(key, !udp, func() *dns.Msg { return s.exchange(req, udp) })
	setReply(m, req)
	if resp == nil {
		m.Rcode = dns.RcodeServerFailure
		return
	}
	fromUpstream(m, resp, resp.Answer, resp.Ns, resp.Extra)
}

// exchange asks the upstreams in order and returns the first answer to
// the question asked, nil if none answers.
func (s *Server) exchange(req *dns.Msg, udp bool) *dns.Msg {
	for _, up := range s.Upstreams {
		c := &dns.Client{Net: "udp", Timeout: s.ForwardTimeout}
		if !udp {
			c.Net = "tcp"
		}
		// A truncated upstream answer is relayed as it is: the client
		// retries over TCP, and so do we then.
		// A fresh ID: the client's is the client's to guess, and the
		// answer is kept for others.
		q := *req
		q.Id = dns.Id()
		resp, _, err := c.Exchange(&q, up)
		if err == nil && (len(resp.Question) != 1 || !strings.EqualFold(resp.Question[0].Name, req.Question[0].Name) ||
			resp.Question[0].Qtype != req.Question[0].Qtype) {
			err = fmt.Errorf("answer to another question: %v", resp.Question)
		}
		if err != nil {
			s.Logger.Debug("upstream failed", "upstream", up, "err", err)
			continue
		}
		return resp
	}
	return nil
}

// HostUpstreams reads the name servers of a resolv.conf file as
// host:port, leaving out the given address (the resolver itself).
func HostUpstreams(resolvConf string, self string) ([]string, error) {
	cfg, err := dns.ClientConfigFromFile(resolvConf)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", resolvConf, err)
	}
	var out []string
	for _, s := range cfg.Servers {
		hp := net.JoinHostPort(s, cfg.Port)
		if hp != self {
			out = append(out, hp)
		}
	}
	return out, nil
}

// Listen opens the UDP and TCP sockets of one address. For port 0 it
// picks a port free for both, trying again when the TCP port of the
// number UDP got is taken. The UDP socket lets Serve open more on the
// same address (SO_REUSEPORT); the TCP one does not, so a second
// resolver on an address in use still fails here.
func Listen(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		pc, err := listenUDP(addr)
		if err != nil {
			return nil, nil, err
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		if port != "0" || attempt == 20 {
			return nil, nil, err
		}
	}
}
