package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// TTL is the time to live of every cluster answer, in seconds.
const TTL = 5

// Server answers DNS over UDP and TCP on one address.
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
	Watch  []string
	Logger *slog.Logger

	zone    atomic.Pointer[compiledZone]
	rotate  atomic.Uint32
	started chan struct{}
}

type compiledZone struct {
	a, aaaa map[string][]dns.RR
	names   map[string]bool
	stamp   fileStamp
}

type fileStamp struct {
	mod  time.Time
	size int64
}

var errZoneGone = errors.New("zone file removed")

// Serve answers on the given UDP connection and TCP listener until ctx is
// done or the zone file goes away. It closes both when it returns.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, l net.Listener) error {
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.PollInterval == 0 {
		s.PollInterval = time.Second
	}
	if s.ForwardTimeout == 0 {
		s.ForwardTimeout = 2 * time.Second
	}
	if err := s.reload(); err != nil {
		pc.Close()
		l.Close()
		return err
	}
	// miekg/dns refuses a Shutdown that comes before the server started
	// ("server not started") and the server then serves on for good: a
	// stop right after the start waits for both to have started.
	started := make(chan struct{}, 2)
	udp := &dns.Server{PacketConn: pc, Handler: s, UDPSize: dns.DefaultMsgSize, NotifyStartedFunc: func() { started <- struct{}{} }}
	tcp := &dns.Server{Listener: l, Handler: s, NotifyStartedFunc: func() { started <- struct{}{} }}
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, srv := range []*dns.Server{udp, tcp} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := srv.ActivateAndServe(); err != nil {
				errs <- err
				started <- struct{}{} // it will not start: do not wait for it
			}
		}()
	}
	for range 2 {
		<-started
	}
	ticker := time.NewTicker(s.PollInterval)
	defer ticker.Stop()
	var result error
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
			if err := s.reload(); err != nil {
				if errors.Is(err, errZoneGone) {
					s.Logger.Info("zone file gone, stopping", "zone", s.ZoneFile)
					break loop
				}
				s.Logger.Warn("zone file not reloaded, keeping the last one", "err", err)
			}
		}
	}
	udp.Shutdown()
	tcp.Shutdown()
	wg.Wait()
	return result
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
	c := &compiledZone{a: map[string][]dns.RR{}, aaaa: map[string][]dns.RR{}, names: map[string]bool{}, stamp: stamp}
	for name, r := range z.Records {
		c.names[name] = true
		// Every parent of a name exists too (empty non-terminals answer
		// NODATA, not NXDOMAIN).
		for p := name; ; {
			i := strings.IndexByte(p, '.')
			if i < 0 || p[i+1:] == Domain || p[i+1:] == "" {
				break
			}
			p = p[i+1:]
			c.names[p] = true
		}
		hdr := func(t uint16) dns.RR_Header {
			return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: TTL}
		}
		for _, ip := range r.A {
			a, _ := netip.ParseAddr(ip)
			c.a[name] = append(c.a[name], &dns.A{Hdr: hdr(dns.TypeA), A: a.AsSlice()})
		}
		for _, ip := range r.AAAA {
			a, _ := netip.ParseAddr(ip)
			c.aaaa[name] = append(c.aaaa[name], &dns.AAAA{Hdr: hdr(dns.TypeAAAA), AAAA: a.AsSlice()})
		}
	}
	return c
}

var soa = &dns.SOA{
	Hdr: dns.RR_Header{Name: Domain, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: TTL},
	Ns:  "ns." + Domain, Mbox: "hostmaster." + Domain, Serial: 1, Refresh: TTL, Retry: TTL, Expire: TTL, Minttl: TTL,
}

// ServeDNS implements dns.Handler.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	if len(req.Question) != 1 {
		m := new(dns.Msg)
		m.SetRcode(req, dns.RcodeFormatError)
		w.WriteMsg(m)
		return
	}
	q := req.Question[0]
	name := strings.ToLower(q.Name)
	if name != Domain && !strings.HasSuffix(name, "."+Domain) {
		s.forward(w, req)
		return
	}
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	z := s.zone.Load()
	switch {
	case name == Domain:
		if q.Qtype == dns.TypeSOA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, soa)
		} else {
			m.Ns = append(m.Ns, soa)
		}
	case !z.names[name]:
		m.Rcode = dns.RcodeNameError
		m.Ns = append(m.Ns, soa)
	default:
		if q.Qtype == dns.TypeA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, s.rotated(z.a[name])...)
		}
		if q.Qtype == dns.TypeAAAA || q.Qtype == dns.TypeANY {
			m.Answer = append(m.Answer, s.rotated(z.aaaa[name])...)
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
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		size := dns.MinMsgSize
		if opt := req.IsEdns0(); opt != nil {
			size = max(int(opt.UDPSize()), dns.MinMsgSize)
		}
		m.Truncate(size)
	}
	w.WriteMsg(m)
}

// rotated starts the list at a different record each time, so clients
// that take the first address spread over all of them.
func (s *Server) rotated(rrs []dns.RR) []dns.RR {
	if len(rrs) < 2 {
		return rrs
	}
	k := int(s.rotate.Add(1)) % len(rrs)
	out := make([]dns.RR, 0, len(rrs))
	return append(append(out, rrs[k:]...), rrs[:k]...)
}

// forward asks the upstream resolvers, in order, and relays the first
// answer; none answering is SERVFAIL.
func (s *Server) forward(w dns.ResponseWriter, req *dns.Msg) {
	_, udp := w.RemoteAddr().(*net.UDPAddr)
	for _, up := range s.Upstreams {
		c := &dns.Client{Net: "udp", Timeout: s.ForwardTimeout}
		if !udp {
			c.Net = "tcp"
		}
		// A truncated upstream answer is relayed as it is: the client
		// retries over TCP, and so do we then.
		resp, _, err := c.Exchange(req, up)
		if err != nil {
			s.Logger.Debug("upstream failed", "upstream", up, "err", err)
			continue
		}
		resp.Id = req.Id
		w.WriteMsg(resp)
		return
	}
	m := new(dns.Msg)
	m.SetRcode(req, dns.RcodeServerFailure)
	w.WriteMsg(m)
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
// number UDP got is taken.
func Listen(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
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
