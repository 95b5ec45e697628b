package daemon

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/netbsd/loopback"
	"github.com/legionbsd/legion/netbsd/resolver"
	"golang.org/x/sys/unix"
)

// Endpoints serves the cluster's services on the loopback network: a VIP
// proxy per service port (and per published port, on 127.0.0.1),
// balancing over the ready tasks, and the resolver's zone. The agent
// hands it every service's endpoints as they arrive with its assignments.
type Endpoints struct {
	ZoneFile string
	Logger   *slog.Logger
	// PublishHost is where published ports listen (127.0.0.1 by default).
	PublishHost string
	// VIPOctet is the second octet VIPs take in 127/8: 10.201.a.b serves
	// at 127.<VIPOctet>.a.b (201 by default). Nodes sharing a host (tests)
	// take different ones.
	VIPOctet byte
	// Local, when set, is where a VIP is served instead (the address
	// itself on a network of namespaces, where VIPs sit on the bridge).
	Local func(netip.Addr) netip.Addr
	// Changed, when set, is called after an Apply (or a retry) that
	// changed which published ports are not served (PublishErrors), for
	// the node to report them: only the node can see a port another
	// process holds.
	Changed func()
	// Retry is how often addresses not served are tried again between
	// changes of the endpoints; zero means UnservedRetry.
	Retry time.Duration

	mu      sync.Mutex
	proxies map[string]*vipProxy // by listen address
	// unserved: why a wanted address could not be listened on (another
	// process holds a published port, say), until it can.
	unserved map[string]error
	// published is the published ports wanted, by listen address; said
	// is the PublishErrors last reported through Changed.
	published map[string]int
	said      []legion.PortError
	// retrying: a goroutine tries the unserved addresses again, with
	// what each was wanted for; closed ends it with Close.
	retrying bool
	wanted   map[string]wantedAddr
	closed   bool
	closing  chan struct{} // closed by Close
	wg       sync.WaitGroup
}

// UnservedRetry is how often a node tries again the VIP and published
// ports it could not listen on, until it can: the process holding one
// may go at any time, and no change of the endpoints need follow.
const UnservedRetry = 5 * time.Second

// wantedAddr is what an address is listened on for.
type wantedAddr struct {
	backends []string
	vip      bool
}

// PublishErrors lists the published ports not served here and why, in
// port order; nil when every one is served.
func (e *Endpoints) PublishErrors() []legion.PortError {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.publishErrors()
}

func (e *Endpoints) publishErrors() []legion.PortError {
	var out []legion.PortError
	for addr, port := range e.published {
		if err := e.unserved[addr]; err != nil {
			out = append(out, legion.PortError{Port: port, Error: err.Error()})
		}
	}
	slices.SortFunc(out, func(a, b legion.PortError) int { return a.Port - b.Port })
	return out
}

// PublishError is why a published port is not served here (nil when it
// is, or when no service publishes it): each change of the endpoints
// tries it again.
func (e *Endpoints) PublishError(port int) error {
	host := e.PublishHost
	if host == "" {
		host = "127.0.0.1"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.unserved[net.JoinHostPort(host, strconv.Itoa(port))]
}

type vipProxy struct {
	p      *loopback.Proxy
	cancel context.CancelFunc
}

func (e *Endpoints) vipOctet() byte {
	if e.VIPOctet == 0 {
		return 201
	}
	return e.VIPOctet
}

// LocalAddr is where a cluster address is served on the loopback network:
// in 127/8, with the given second octet.
func LocalAddr(a netip.Addr, second byte) netip.Addr {
	b := a.As4()
	b[0], b[1] = 127, second
	return netip.AddrFrom4(b)
}

// Apply serves the given endpoints: proxies follow (open connections keep
// their backend), the zone file is rewritten. The proxies live until
// Close or ctx ends. The loopback network enforces no policy.
func (e *Endpoints) Apply(ctx context.Context, services []*endpoints.Service, _ *endpoints.Policies) {
	if e.Logger == nil {
		e.Logger = slog.New(slog.DiscardHandler)
	}
	if e.PublishHost == "" {
		e.PublishHost = "127.0.0.1"
	}
	local := e.Local
	if local == nil {
		local = func(a netip.Addr) netip.Addr { return LocalAddr(a, e.vipOctet()) }
	}
	zone := zoneServices(services, local)
	want := map[string][]string{} // listen address -> backends
	vips := map[string]bool{}     // which of them are VIPs
	published := map[string]int{} // and which published, at which port
	for _, s := range services {
		var vip netip.Addr
		if a, err := netip.ParseAddr(s.VIP); err == nil && a.Is4() && !s.DNSRR {
			vip = local(a)
		}
		for _, p := range s.Ports {
			if p.Protocol != legion.TCP {
				continue
			}
			var backends []string
			for _, t := range s.Tasks {
				backends = append(backends, net.JoinHostPort(t.IP, strconv.Itoa(p.TargetPort)))
			}
			if vip.IsValid() {
				at := net.JoinHostPort(vip.String(), strconv.Itoa(p.Port))
				want[at], vips[at] = backends, true
			}
			if p.Publish != "" {
				at := net.JoinHostPort(e.PublishHost, strconv.Itoa(p.PublishedPort))
				want[at], published[at] = backends, p.PublishedPort
			}
		}
	}
	if e.ZoneFile != "" {
		if err := resolver.WriteZone(e.ZoneFile, resolver.BuildZone(zone, nil)); err != nil {
			e.Logger.Warn("writing the resolver's zone", "err", err)
		}
	}
	e.mu.Lock()
	changed := false
	defer func() {
		e.mu.Unlock()
		if changed && e.Changed != nil {
			e.Changed()
		}
	}()
	defer func() {
		changed = e.noteChange()
		if len(e.unserved) > 0 && !e.retrying && !e.closed {
			if e.closing == nil {
				e.closing = make(chan struct{})
			}
			e.retrying = true
			e.wg.Add(1)
			go func() { defer e.wg.Done(); e.retry(ctx, e.closing) }()
		}
	}()
	if e.proxies == nil {
		e.proxies = map[string]*vipProxy{}
	}
	e.unserved, e.published, e.wanted = map[string]error{}, published, map[string]wantedAddr{}
	for addr, vp := range e.proxies {
		if _, ok := want[addr]; !ok {
			vp.cancel()
			delete(e.proxies, addr)
		}
	}
	for addr, backends := range want {
		vp, ok := e.proxies[addr]
		if !ok {
			var err error
			if vp, err = e.listen(ctx, addr, vips[addr]); err != nil {
				e.Logger.Warn("VIP port not served", "addr", addr, "err", err)
				e.unserved[addr], e.wanted[addr] = err, wantedAddr{backends, vips[addr]}
				continue
			}
		}
		vp.p.SetBackends(backends)
	}
}

// listen serves addr with a proxy of its own. Called with mu held.
func (e *Endpoints) listen(ctx context.Context, addr string, vip bool) (*vipProxy, error) {
	lc := net.ListenConfig{}
	if vip {
		// Nodes of one cluster sharing a host serve the same VIPs with
		// the same backends: they share the port.
		lc.Control = reusePort
	}
	l, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithCancel(ctx)
	vp := &vipProxy{p: &loopback.Proxy{Logger: e.Logger}, cancel: cancel}
	e.proxies[addr] = vp
	e.wg.Add(1)
	go func() { defer e.wg.Done(); vp.p.Serve(pctx, l) }()
	return vp, nil
}

// noteChange records the published ports not served and reports whether
// they changed since last noted. Called with mu held.
func (e *Endpoints) noteChange() bool {
	now := e.publishErrors()
	changed := !slices.Equal(now, e.said)
	e.said = now
	return changed
}

// retry tries the unserved addresses again every Retry until each is
// served, ctx ends or Close; an Apply meanwhile replaces what is wanted.
func (e *Endpoints) retry(ctx context.Context, closing <-chan struct{}) {
	every := e.Retry
	if every <= 0 {
		every = UnservedRetry
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			e.mu.Lock()
			e.retrying = false
			e.mu.Unlock()
			return
		case <-closing:
			return
		case <-tick.C:
		}
		e.mu.Lock()
		if e.closed {
			e.retrying = false
			e.mu.Unlock()
			return
		}
		for addr := range e.unserved {
			w := e.wanted[addr]
			vp, err := e.listen(ctx, addr, w.vip)
			if err != nil {
				e.unserved[addr] = err
				continue
			}
			vp.p.SetBackends(w.backends)
			delete(e.unserved, addr)
			delete(e.wanted, addr)
			e.Logger.Info("port served again", "addr", addr)
		}
		changed := e.noteChange()
		done := len(e.unserved) == 0
		if done {
			e.retrying = false
		}
		e.mu.Unlock()
		if changed && e.Changed != nil {
			e.Changed()
		}
		if done {
			return
		}
	}
}

// reusePort lets every node of a cluster on this host listen on a VIP's
// port (SO_REUSEPORT): the kernel spreads connections over their
// proxies, which hold the same backends. Published ports stay exclusive,
// so two clusters never share one by accident.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// Close stops every proxy and waits for them.
func (e *Endpoints) Close() {
	e.mu.Lock()
	if !e.closed && e.closing != nil {
		close(e.closing)
	}
	e.closed = true
	for addr, vp := range e.proxies {
		vp.cancel()
		delete(e.proxies, addr)
	}
	e.mu.Unlock()
	e.wg.Wait()
}
