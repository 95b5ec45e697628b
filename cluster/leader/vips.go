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

// AllocateVIPs gives every VIP-mode service without one the lowest free
// address of the cluster's service range, recorded in its status. The
// leader runs it; a write that lost a race is tried again on the next
// change. The addresses of one call go to the log together: an apply of
// many services would otherwise wait out one commit per service, and
// each service's endpoints would change at every node once per commit.
func AllocateVIPs(ctx context.Context, st *store.Store) error {
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
		} else if s.Spec.Endpoint.Mode == legion.EndpointVIP {
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
