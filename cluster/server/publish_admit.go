package server

import (
	"fmt"
	"net"
	"slices"
	"strconv"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// A published port is the nodes', not its namespace's: in ingress mode
// every node's, in host mode any node's. On FreeBSD it is a pf rdr of
// every packet to the node's external address and that port, ahead of
// the node's own sockets: a service publishing 22 takes every node's
// sshd, one publishing the API's port the managers. Two checks follow
// from it.

// admitPublishing refuses a namespace user's Service that publishes a
// port its stored version did not, unless the user's Namespace lists
// publish in spec.security.allow (a cluster admin's choice, as
// Namespaces are cluster-scoped). The cluster admin publishes freely, as
// in Swarm; a team that needs a way in without it has Routes, whose hosts
// are its namespace's own.
func admitPublishing(st *store.Store, a *admission) ([]string, error) {
	if !a.user {
		return nil, nil
	}
	var errs []string
	for _, s := range changedPublishing(a) {
		had := map[publishedKey]bool{}
		if old, ok := a.current[legion.ObjectKey(s)].(*legion.Service); ok {
			for _, k := range publishedPorts(old) {
				had[k] = true
			}
		}
		ns := s.Metadata.Namespace
		sec, err := a.security(st, ns)
		if err != nil {
			return nil, err
		}
		if slices.Contains(sec.Allow, legion.AllowPublish) {
			continue
		}
		for i, p := range s.Spec.Endpoint.Ports {
			k := publishedKey{p.PublishedPort, p.Protocol}
			if p.Publish == "" || p.PublishedPort == 0 || had[k] {
				continue
			}
			errs = append(errs, fmt.Sprintf("Service %s: spec.endpoint.ports[%d].publishedPort: %d/%s would be taken on the nodes, which are not namespace %s's: "+
				"its users may publish ports once Namespace %s lists %s in spec.security.allow, which a cluster admin may add (a Route serves HTTP by host without it)",
				legion.DisplayName(s), i, p.PublishedPort, p.Protocol, ns, ns, legion.AllowPublish))
		}
	}
	return errs, nil
}

// admitSystemPorts refuses a changed Service that publishes a port the
// cluster itself listens on: a manager's API and Raft, a node's ingress
// proxy, its WireGuard mesh. Published, it would take that port from
// them on every node (ingress) or on one (host), whoever applies it.
func admitSystemPorts(st *store.Store, a *admission) ([]string, error) {
	mine := changedPublishing(a)
	if len(mine) == 0 {
		return nil, nil
	}
	system, err := systemPorts(st)
	if err != nil {
		return nil, err
	}
	var errs []string
	for _, s := range mine {
		for i, p := range s.Spec.Endpoint.Ports {
			if p.Publish == "" || p.PublishedPort == 0 {
				continue
			}
			if what, ok := system[publishedKey{p.PublishedPort, p.Protocol}]; ok {
				errs = append(errs, fmt.Sprintf("Service %s: spec.endpoint.ports[%d].publishedPort: %d/%s is the cluster's own (%s): published, it would take it from the nodes",
					legion.DisplayName(s), i, p.PublishedPort, p.Protocol, what))
			}
		}
	}
	return errs, nil
}

// systemPorts are the ports the cluster listens on, with what listens:
// the managers' (Raft's servers' addresses, which the API shares), and
// each node's ingress proxy and WireGuard endpoint as it reports them.
func systemPorts(st *store.Store) (map[publishedKey]string, error) {
	out := map[publishedKey]string{}
	add := func(addr string, proto legion.Protocol, what string) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return
		}
		if n, err := strconv.Atoi(port); err == nil && n > 0 {
			k := publishedKey{n, proto}
			if _, ok := out[k]; !ok {
				out[k] = what
			}
		}
	}
	if r := st.Raft(); r != nil {
		if f := r.GetConfiguration(); f.Error() == nil {
			for _, srv := range f.Configuration().Servers {
				add(string(srv.Address), legion.TCP, "a manager's API at "+string(srv.Address))
			}
		}
	}
	nodes, err := listKind[*legion.Node](st, legion.KindNode, "")
	if err != nil {
		return nil, err
	}
	for _, n := range nodes {
		name := n.Metadata.Name
		if in := n.Status.Ingress; in != nil {
			add(in.HTTP, legion.TCP, "node "+name+"'s ingress proxy")
			add(in.HTTPS, legion.TCP, "node "+name+"'s ingress proxy")
		}
		if wg := n.Status.WireGuard; wg != nil {
			add(wg.Endpoint, legion.UDP, "node "+name+"'s WireGuard mesh")
		}
	}
	return out, nil
}
