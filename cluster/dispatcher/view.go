package dispatcher

import (
	"iter"
	"slices"
	"sort"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/endpoints"
)

// View is everything a node is sent, read once from a replica: its tasks
// and the values they use, and what every node follows (the services'
// endpoints, the mesh's peers, the routes, the network policy state).
// The dispatcher encodes it; legion up's in-process dispatcher hands it
// over as it is.
type View struct {
	At    uint64         // the version the node's tasks were read at
	Tasks []*legion.Task // the node's, in namespace and name order
	// Values holds the Secrets and Configs the node's tasks use and the
	// certificates of the routes the node may serve, by legion.Key.
	Values    map[string][]byte
	Endpoints []endpoints.Service
	Peers     []endpoints.Peer
	Routes    []endpoints.Route
	Policies  endpoints.Policies
	// Volumes are those the node's tasks mount and those bound to the
	// node or moving from or to it, in namespace and name order.
	Volumes []*legion.Volume
}

// ReadView reads node's view: every task once (the node's, the ready ones
// for endpoints, the running ones for policy), every node once (peers,
// who serves HTTPS), every Volume once.
func ReadView(st *store.Store, node string) (View, error) {
	taskObjs, at, err := st.List(legion.KindTask, "", nil)
	if err != nil {
		return View{}, err
	}
	v := View{At: at, Values: map[string][]byte{}}
	var ready, running []*legion.Task
	for _, o := range taskObjs {
		t := o.(*legion.Task)
		if t.Spec.Node == node {
			v.Tasks = append(v.Tasks, t)
		}
		if endpoints.Ready(t) {
			ready = append(ready, t)
		}
		if endpoints.Running(t) {
			running = append(running, t)
		}
	}
	sort.Slice(v.Tasks, func(i, j int) bool {
		a, b := v.Tasks[i].Metadata, v.Tasks[j].Metadata
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	for _, t := range v.Tasks {
		for _, ref := range ValueRefs(t) {
			if data, ok := valueOf(st, ref.Kind, t.Metadata.Namespace, ref.Name); ok {
				v.Values[legion.Key(ref.Kind, t.Metadata.Namespace, ref.Name)] = data
			}
		}
	}
	vols, err := readVolumes(st)
	if err != nil {
		return View{}, err
	}
	v.Volumes = vols.forNode(node, v.Tasks)
	services, err := listAs[*legion.Service](st, legion.KindService)
	if err != nil {
		return View{}, err
	}
	v.Endpoints = endpoints.Compute(services, ready)
	nodes, err := listAs[*legion.Node](st, legion.KindNode)
	if err != nil {
		return View{}, err
	}
	v.Peers = endpoints.Peers(nodes)
	routes, err := listAs[*legion.Route](st, legion.KindRoute)
	if err != nil {
		return View{}, err
	}
	v.Routes = endpoints.ComputeRoutes(routes, v.Endpoints)
	if mayServeHTTPS(slices.Values(nodes), node) {
		for _, r := range v.Routes {
			if r.TLSSecret == "" {
				continue
			}
			// A route cannot hand nodes another Secret: only one holding
			// a certificate and a key goes.
			if data, ok := valueOf(st, legion.KindSecret, r.Namespace, r.TLSSecret); ok && holdsCertificate(data) {
				v.Values[legion.Key(legion.KindSecret, r.Namespace, r.TLSSecret)] = data
			}
		}
	}
	namespaces, err := listAs[*legion.Namespace](st, legion.KindNamespace)
	if err != nil {
		return View{}, err
	}
	policies, err := listAs[*legion.NetworkPolicy](st, legion.KindNetworkPolicy)
	if err != nil {
		return View{}, err
	}
	v.Policies = endpoints.ComputePolicies(namespaces, policies, running)
	return v, nil
}

// mayServeHTTPS: every node reads the routes' certificates until one is
// labelled legion.ingress=true; then only labelled ones do.
func mayServeHTTPS(nodes iter.Seq[*legion.Node], node string) bool {
	any := false
	for n := range nodes {
		if n.Metadata.Labels[IngressLabel] == "true" {
			if n.Metadata.Name == node {
				return true
			}
			any = true
		}
	}
	return !any
}

// valueOf is a Secret's or Config's data; a missing one is absent (the
// admission checked it; a deleted one fails the task's start).
func valueOf(st *store.Store, kind legion.Kind, namespace, name string) ([]byte, bool) {
	o, _, err := st.Get(kind, namespace, name)
	if err != nil {
		return nil, false
	}
	switch x := o.(type) {
	case *legion.Secret:
		return x.Spec.Data, true
	case *legion.Config:
		return x.Spec.Data, true
	}
	return nil, false
}

// listAs lists every object of a kind, typed.
func listAs[T legion.Object](st *store.Store, kind legion.Kind) ([]T, error) {
	objs, _, err := st.List(kind, "", nil)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(objs))
	for i, o := range objs {
		out[i] = o.(T)
	}
	return out, nil
}
