package server

import (
	"fmt"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// admitRouteHosts refuses a changed Route for a host that another
// namespace already routes: a host belongs to the namespaces whose
// Routes name it, and a namespace may add one only while no other
// namespace does. Without it, a user who may write Routes in any
// namespace could take a path of another team's host (the longest path
// wins), or the whole host, and have the leader order an ACME
// certificate for it. A wildcard host claims the names it covers: an
// exact host under another namespace's wildcard is refused, and so is a
// wildcard over another namespace's exact host. A namespace that shares
// a host from before this check keeps changing its own Routes of it.
// Applies with Routes are admitted one at a time (serialised), so two
// namespaces cannot claim one host at once.
func admitRouteHosts(st *store.Store, a *admission) ([]string, error) {
	if !slices.ContainsFunc(a.changed, func(c applyItem) bool { return c.obj.GetKind() == legion.KindRoute }) {
		return nil, nil
	}
	batch := map[string]bool{}
	for _, it := range a.items {
		if _, ok := it.obj.(*legion.Route); ok {
			batch[legion.ObjectKey(it.obj)] = true
		}
	}
	stored, err := listKind[*legion.Route](st, legion.KindRoute, "")
	if err != nil {
		return nil, err
	}
	var routes []*legion.Route // what claims hosts: stored, then the apply's
	for _, r := range stored {
		if !batch[legion.ObjectKey(r)] {
			routes = append(routes, r)
		}
	}
	var errs []string
	for _, it := range a.items {
		r, ok := it.obj.(*legion.Route)
		if !ok {
			continue
		}
		if a.changedKeys[legion.ObjectKey(r)] && !claims(routes, r.Metadata.Namespace, r.Spec.Host) {
			if other := claimant(routes, r.Metadata.Namespace, r.Spec.Host); other != nil {
				errs = append(errs, fmt.Sprintf("Route %s: spec.host: %s is routed by namespace %s (route %s, host %s): a host's routes are all in one namespace",
					legion.DisplayName(r), r.Spec.Host, other.Metadata.Namespace, other.Metadata.Name, other.Spec.Host))
				continue
			}
		}
		routes = append(routes, r)
	}
	return errs, nil
}

// claims: a route of namespace ns names host itself. (Only the same
// host: a wildcard over its own exact host may still cover another
// namespace's.)
func claims(routes []*legion.Route, ns, host string) bool {
	for _, r := range routes {
		if r.Metadata.Namespace == ns && r.Spec.Host == host {
			return true
		}
	}
	return false
}

// claimant is a route of another namespace than ns whose host overlaps
// host, or nil.
func claimant(routes []*legion.Route, ns, host string) *legion.Route {
	for _, r := range routes {
		if r.Metadata.Namespace != ns && hostsOverlap(r.Spec.Host, host) {
			return r
		}
	}
	return nil
}

// hostsOverlap: some name is served by both hosts, each exact or a
// wildcard taking one label in front (*.example.org).
func hostsOverlap(a, b string) bool {
	if a == b {
		return true
	}
	covers := func(wild, exact string) bool {
		suffix, ok := strings.CutPrefix(wild, "*")
		if !ok || strings.HasPrefix(exact, "*") {
			return false
		}
		label, found := strings.CutSuffix(exact, suffix)
		return found && label != "" && !strings.Contains(label, ".")
	}
	return covers(a, b) || covers(b, a)
}
