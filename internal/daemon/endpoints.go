package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"sync"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/netbsd"
	"github.com/legionbsd/legion/netbsd/loopback"
	"github.com/legionbsd/legion/netbsd/resolver"
)

// Endpoints keeps the loopback network's service side in step with the
// store: a VIP proxy per service port (and per published port, on
// 127.0.0.1), balancing over the ready tasks, and the resolver's zone.
type Endpoints struct {
	Store    *store.Store
	ZoneFile string
	Logger   *slog.Logger
	// PublishHost is where published ports listen (127.0.0.1 by default).
	PublishHost string
	// VIPOctet is the second octet VIPs take in 127/8: 10.201.a.b serves
	// at 127.<VIPOctet>.a.b (201 by default). Nodes sharing a host (tests)
	// take different ones.
	VIPOctet byte

	mu      sync.Mutex
	proxies map[string]*vipProxy // by listen address
	wg      sync.WaitGroup
}

type vipProxy struct {
	p      *loopback.Proxy
	cancel context.CancelFunc
}

// Run follows the store until ctx ends, then stops every proxy.
func (e *Endpoints) Run(ctx context.Context) error {
	if e.Logger == nil {
		e.Logger = slog.New(slog.DiscardHandler)
	}
	if e.PublishHost == "" {
		e.PublishHost = "127.0.0.1"
	}
	e.proxies = map[string]*vipProxy{}
	defer func() {
		e.mu.Lock()
		for _, vp := range e.proxies {
			vp.cancel()
		}
		e.mu.Unlock()
		e.wg.Wait()
	}()
	for ctx.Err() == nil {
		at, err := e.sync(ctx)
		if err != nil {
			return err
		}
		if err := e.Store.WaitChange(ctx, at, legion.KindTask, legion.KindService); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
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

// sync computes the endpoints from the store and applies them.
func (e *Endpoints) sync(ctx context.Context) (uint64, error) {
	svcObjs, at, err := e.Store.List(legion.KindService, "", nil)
	if err != nil {
		return 0, err
	}
	taskObjs, _, err := e.Store.List(legion.KindTask, "", nil)
	if err != nil {
		return 0, err
	}
	ready := map[string][]*legion.Task{} // namespace/service -> ready tasks
	for _, o := range taskObjs {
		t := o.(*legion.Task)
		if t.Spec.Owner.Kind != legion.KindService || t.Spec.DesiredState != legion.TaskRunning ||
			t.Status.State != legion.TaskRunning || !t.Status.Ready || t.Status.IP == "" {
			continue
		}
		k := t.Metadata.Namespace + "/" + t.Spec.Owner.Name
		ready[k] = append(ready[k], t)
	}
	var zone []resolver.Service
	want := map[string][]string{} // listen address -> backends
	for _, o := range svcObjs {
		s := o.(*legion.Service)
		key := s.Metadata.Namespace + "/" + s.Metadata.Name
		tasks := ready[key]
		sort.Slice(tasks, func(i, j int) bool { return tasks[i].Metadata.Name < tasks[j].Metadata.Name })
		zs := resolver.Service{Namespace: s.Metadata.Namespace, Name: s.Metadata.Name,
			DNSRR: s.Spec.Endpoint.Mode == legion.EndpointDNSRR, Stateful: s.Spec.Mode == legion.ModeStateful}
		var vip netip.Addr
		if s.Status.VIP != "" && !zs.DNSRR {
			if a, err := netip.ParseAddr(s.Status.VIP); err == nil {
				if a.Is4() {
					vip = LocalAddr(a, e.vipOctet())
					zs.VIP = vip.String()
				}
			}
		}
		for _, t := range tasks {
			zs.Tasks = append(zs.Tasks, resolver.Task{IP: t.Status.IP, Ready: true, Ordinal: t.Spec.Slot})
		}
		zone = append(zone, zs)
		for _, p := range s.Spec.Endpoint.Ports {
			if p.Protocol != legion.TCP {
				continue
			}
			target := p.TargetPort.Number
			if p.TargetPort.Name != "" {
				cp, ok := s.Spec.Pod.FindPort(p.TargetPort)
				if !ok {
					continue
				}
				target = cp.ContainerPort
			}
			var backends []string
			for _, t := range tasks {
				backends = append(backends, net.JoinHostPort(t.Status.IP, strconv.Itoa(target)))
			}
			if vip.IsValid() {
				want[net.JoinHostPort(vip.String(), strconv.Itoa(p.Port))] = backends
			}
			if p.Publish != "" {
				want[net.JoinHostPort(e.PublishHost, strconv.Itoa(p.PublishedPort))] = backends
			}
		}
	}
	if e.ZoneFile != "" {
		if err := resolver.WriteZone(e.ZoneFile, resolver.BuildZone(zone, nil)); err != nil {
			e.Logger.Warn("writing the resolver's zone", "err", err)
		}
	}
	e.apply(ctx, want)
	return at, nil
}

func (e *Endpoints) apply(ctx context.Context, want map[string][]string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for addr, vp := range e.proxies {
		if _, ok := want[addr]; !ok {
			vp.cancel()
			delete(e.proxies, addr)
		}
	}
	for addr, backends := range want {
		vp, ok := e.proxies[addr]
		if !ok {
			l, err := net.Listen("tcp", addr)
			if err != nil {
				e.Logger.Warn("VIP port not served", "addr", addr, "err", err)
				continue
			}
			pctx, cancel := context.WithCancel(ctx)
			vp = &vipProxy{p: &loopback.Proxy{Logger: e.Logger}, cancel: cancel}
			e.proxies[addr] = vp
			e.wg.Add(1)
			go func() { defer e.wg.Done(); vp.p.Serve(pctx, l) }()
		}
		vp.p.SetBackends(backends)
	}
}

// AllocateVIPs gives every VIP-mode service without one the lowest free
// address of the service range, recorded in its status. The leader runs
// it; a write that lost a race is tried again on the next change.
func AllocateVIPs(ctx context.Context, st *store.Store) error {
	objs, _, err := st.List(legion.KindService, "", nil)
	if err != nil {
		return err
	}
	assigned := map[string]netip.Addr{}
	var need []*legion.Service
	for _, o := range objs {
		s := o.(*legion.Service)
		key := s.Metadata.Namespace + "/" + s.Metadata.Name
		if a, err := netip.ParseAddr(s.Status.VIP); err == nil {
			assigned[key] = a
		} else if s.Spec.Endpoint.Mode == legion.EndpointVIP {
			need = append(need, s)
		}
	}
	for _, s := range need {
		key := s.Metadata.Namespace + "/" + s.Metadata.Name
		a, err := netbsd.AssignVIP(assigned, key)
		if err != nil {
			return fmt.Errorf("service %s: %w", key, err)
		}
		s.Status.VIP = a.String()
		if _, err := st.PutStatus(ctx, s, store.Precondition{Version: s.Metadata.Version}); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		assigned[key] = a
	}
	return nil
}

// RunVIPAllocator allocates VIPs after every change to services, until
// ctx ends. The leader runs it.
func RunVIPAllocator(ctx context.Context, st *store.Store, log *slog.Logger) error {
	for ctx.Err() == nil {
		at, err := st.Version()
		if err != nil {
			return err
		}
		if err := AllocateVIPs(ctx, st); err != nil && log != nil {
			log.Warn("allocating VIPs", "err", err)
		}
		if err := st.WaitChange(ctx, at, legion.KindService); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}
