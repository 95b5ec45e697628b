package server

import (
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// publishedKey is a published port cluster-wide: ingress publishes it on
// every node and a host-mode port on any node may take it, so both modes
// share one space.
type publishedKey struct {
	port  int
	proto legion.Protocol
}

func publishedPorts(s *legion.Service) []publishedKey {
	var out []publishedKey
	for _, p := range s.Spec.Endpoint.Ports {
		if p.Publish != "" && p.PublishedPort != 0 {
			out = append(out, publishedKey{p.PublishedPort, p.Protocol})
		}
	}
	return out
}

// changedPublishing is the apply's changed Services that publish ports.
func changedPublishing(a *admission) []*legion.Service {
	var out []*legion.Service
	for _, c := range a.changed {
		if s, ok := c.obj.(*legion.Service); ok && len(publishedPorts(s)) > 0 {
			out = append(out, s)
		}
	}
	return out
}

// admitPorts refuses a changed Service publishing a port another service
// already publishes (stored, or earlier in the same apply), naming that
// service. The leader admits applies one at a time, so this check and the
// write that follows make it the owner of published ports.
func admitPorts(st *store.Store, a *admission) ([]string, error) {
	if len(changedPublishing(a)) == 0 {
		return nil, nil
	}
	owners := map[publishedKey]string{}
	batch := map[string]bool{}
	for _, it := range a.items {
		if _, ok := it.obj.(*legion.Service); ok {
			batch[legion.ObjectKey(it.obj)] = true
		}
	}
	stored, err := listKind[*legion.Service](st, legion.KindService, "")
	if err != nil {
		return nil, err
	}
	for _, s := range stored {
		if batch[legion.ObjectKey(s)] {
			continue // the apply replaces what it published
		}
		for _, k := range publishedPorts(s) {
			owners[k] = s.Metadata.Namespace + "/" + s.Metadata.Name
		}
	}
	var errs []string
	for _, it := range a.items {
		s, ok := it.obj.(*legion.Service)
		if !ok {
			continue
		}
		self := s.Metadata.Namespace + "/" + s.Metadata.Name
		for i, p := range s.Spec.Endpoint.Ports {
			if p.Publish == "" || p.PublishedPort == 0 {
				continue
			}
			k := publishedKey{p.PublishedPort, p.Protocol}
			if o, taken := owners[k]; taken && o != self && a.changedKeys[legion.ObjectKey(s)] {
				errs = append(errs, fmt.Sprintf("Service %s: spec.endpoint.ports[%d].publishedPort: %d/%s is already published by service %s",
					legion.DisplayName(s), i, p.PublishedPort, p.Protocol, o))
				continue
			}
			owners[k] = self
		}
	}
	return errs, nil
}
