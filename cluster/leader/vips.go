package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/netplan"
	"github.com/legionbsd/legion/cluster/store"
)

// VIPStore is what the VIP allocator reads and writes: *store.Store.
type VIPStore interface {
	netplan.Getter
	List(kind legion.Kind, namespace string, keep func(legion.Object) bool) ([]legion.Object, uint64, error)
	WriteAll(ctx context.Context, writes []store.Write) []error
	WaitEvent(ctx context.Context, from uint64, match func(store.Event) bool, kinds ...legion.Kind) error
	Version() (uint64, error)
}

// AllocateVIPs gives every VIP-mode service without one the lowest free
// address of the cluster's service range, recorded in its status. The
// leader runs it; a write that lost a race is tried again on the next
// change. The addresses of one call go to the log together: an apply of
// many services would otherwise wait out one commit per service, and
// each service's endpoints would change at every node once per commit.
func AllocateVIPs(ctx context.Context, st VIPStore) error {
	objs, _, err := st.List(legion.KindService, "", nil)
	if err != nil {
		return err
	}
	plan, err := netplan.Read(st)
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
		} else if needsVIP(s) {
			need = append(need, s)
		}
	}
	var writes []store.Write
	var failed error
	for _, s := range need {
		key := s.Metadata.Namespace + "/" + s.Metadata.Name
		a, err := plan.AssignVIP(assigned, key)
		if err != nil {
			failed = fmt.Errorf("service %s: %w", key, err)
			break
		}
		s.Status.VIP = a.String()
		// The service as read, at its version: only its status differs.
		writes = append(writes, store.Write{Object: s, Options: store.WriteOptions{Precondition: store.Precondition{Version: s.Metadata.Version}}})
		assigned[key] = a
	}
	if len(writes) > 0 {
		for _, err := range st.WriteAll(ctx, writes) {
			if err != nil && !errors.Is(err, store.ErrConflict) && failed == nil {
				failed = err
			}
		}
	}
	return failed
}

// needsVIP reports whether a service is one AllocateVIPs gives an
// address: in VIP mode, without one.
func needsVIP(s *legion.Service) bool {
	_, err := netip.ParseAddr(s.Status.VIP)
	return err != nil && s.Spec.Endpoint.Mode == legion.EndpointVIP
}

// RunVIPAllocator allocates VIPs whenever a service may need one, until
// ctx ends. The leader runs it. After a failed allocation, any change to
// a service sends it to try again.
func RunVIPAllocator(ctx context.Context, st VIPStore, log *slog.Logger) error {
	for ctx.Err() == nil {
		at, err := st.Version()
		if err != nil {
			return err
		}
		err = AllocateVIPs(ctx, st)
		if err != nil && log != nil {
			log.Warn("allocating VIPs", "err", err)
		}
		retry := err != nil
		if err := st.WaitEvent(ctx, at, func(ev store.Event) bool { return vipWanted(ev, retry) }, legion.KindService); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
	return nil
}

// vipWanted reports whether an event may call for an address: a service
// that needs one (made, or switched to VIP mode), or a service deleted,
// which frees one for a service the range had no room for. With retry,
// every change to a service does. A rollout's status writes to services
// that have their address do not: each allocation lists and decodes
// every service.
func vipWanted(ev store.Event, retry bool) bool {
	s, ok := ev.Object.(*legion.Service)
	return ok && (retry || ev.Type == store.Deleted || needsVIP(s))
}
