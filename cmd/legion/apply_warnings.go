package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/endpoints"
)

// Apply-time warnings: what the cluster stored but will not do as the
// manifest says, because of the nodes it has. "created" alone would not
// tell.

// unservedRoutes says which of routes no ready node serves: over HTTPS
// for a route with TLS, over HTTP for the others. Nothing answers for
// such a route's host until a node serves Routes.
func unservedRoutes(routes []*legion.Route, nodes []*legion.Node) []string {
	var http, https bool
	for _, n := range nodes {
		if in := n.Status.Ingress; n.Status.State == legion.NodeReady && in != nil {
			http = http || in.HTTP != ""
			https = https || in.HTTPS != ""
		}
	}
	var out []string
	for _, r := range routes {
		switch {
		case r.Spec.TLS != nil && !https:
			out = append(out, fmt.Sprintf("%s: no ready node serves Routes over HTTPS; start one with --ingress-tls-listen (legion daemon, legion up)", ref(r)))
		case r.Spec.TLS == nil && !http:
			out = append(out, fmt.Sprintf("%s: no ready node serves Routes over HTTP; start one with --ingress-listen (legion daemon, legion up)", ref(r)))
		}
	}
	return out
}

// unenforcedLimits says which of the workloads have limits that the
// cluster's process-platform nodes would not apply: their containers are
// host processes, with no rctl. The planner places such tasks there all
// the same (that platform is for development), so the limits would be
// silently ignored.
func unenforcedLimits(objs []legion.Object, nodes []*legion.Node) []string {
	return unenforced(objs, nodes, hasLimits, "its resource limits are not enforced on process-platform nodes (%s), where its tasks may run: only FreeBSD jails nodes apply them")
}

// unenforcedPolicies says which NetworkPolicies, and locked Namespaces,
// the cluster's process-platform nodes would not enforce: they have no
// pf, so their pods reach each other whatever the policy says. (The
// default isolation is not enforced there either, which the daemon and
// legion doctor say; a Namespace applied with it asked for nothing.)
func unenforcedPolicies(objs []legion.Object, nodes []*legion.Node) []string {
	return unenforced(objs, nodes, isPolicy, "not enforced on process-platform nodes (%s), where the namespace's tasks may run: they have no pf, so their pods reach each other whatever it says; only FreeBSD jails nodes enforce network policy")
}

// unenforcedSizes says which Volumes, and workloads' claims and tmpfs
// volumes, have a size that the cluster's process-platform nodes would
// not hold them to: there a Volume is a plain directory and a tmpfs
// volume a directory of the task's, with no quota. A Volume kept on a
// jails node (spec.node) is held to its size there.
func unenforcedSizes(objs []legion.Object, nodes []*legion.Node) []string {
	process := map[string]bool{}
	for _, n := range nodes {
		process[n.Metadata.Name] = n.Status.Runtime == legion.NodeRuntimeProcess
	}
	volume := func(o legion.Object) bool {
		v, ok := o.(*legion.Volume)
		return ok && v.Spec.Driver == legion.DriverZFS && v.Spec.Size > 0 && (v.Spec.Node == "" || process[v.Spec.Node])
	}
	return slices.Concat(
		unenforced(objs, nodes, volume, "its size is not enforced on process-platform nodes (%s), where it may be kept: there a Volume is a plain directory; only FreeBSD jails nodes (ZFS) hold it to its size"),
		unenforced(objs, nodes, hasVolumeSizes, "the sizes of its claims and tmpfs volumes are not enforced on process-platform nodes (%s), where its tasks may run: there they are plain directories; only FreeBSD jails nodes hold them to their sizes"))
}

// sized: o is a Volume or a workload with a size to hold it to.
func sized(o legion.Object) bool {
	v, ok := o.(*legion.Volume)
	return ok && v.Spec.Size > 0 || hasVolumeSizes(o)
}

// hasVolumeSizes: o is a workload whose pod sizes a claim or a tmpfs
// volume.
func hasVolumeSizes(o legion.Object) bool {
	pod := legion.PodOf(o)
	return pod != nil && slices.ContainsFunc(pod.Volumes, func(v legion.PodVolume) bool {
		return v.Claim != nil && v.Claim.Size > 0 || v.Tmpfs != nil && v.Tmpfs.Size > 0
	})
}

// unenforced says, for each of objs that asks what process-platform
// nodes do not do (asks), why (why names the ready such nodes with %s);
// nothing when there are none.
func unenforced(objs []legion.Object, nodes []*legion.Node, asks func(legion.Object) bool, why string) []string {
	process := processNodes(nodes)
	if process == "" {
		return nil
	}
	var out []string
	for _, o := range objs {
		if asks(o) {
			out = append(out, ref(o)+": "+fmt.Sprintf(why, process))
		}
	}
	return out
}

// isPolicy: o is a NetworkPolicy, or a locked Namespace.
func isPolicy(o legion.Object) bool {
	switch o := o.(type) {
	case *legion.NetworkPolicy:
		return true
	case *legion.Namespace:
		return o.Spec.Isolation == legion.IsolationLocked
	}
	return false
}

// processNodes names the ready process-platform nodes, in order, or is
// empty when there are none. Their containers are host processes.
func processNodes(nodes []*legion.Node) string {
	var process []string
	for _, n := range nodes {
		if n.Status.Runtime == legion.NodeRuntimeProcess && n.Status.State == legion.NodeReady {
			process = append(process, n.Metadata.Name)
		}
	}
	slices.Sort(process)
	return strings.Join(process, ", ")
}

// hasLimits: o is a workload whose pod has limits.
func hasLimits(o legion.Object) bool {
	pod := legion.PodOf(o)
	return pod != nil && pod.HasLimits()
}

// lister lists a kind's objects of a namespace (cluster-scoped kinds:
// namespace "").
type lister func(kind legion.Kind, namespace string) ([]legion.Object, error)

// warnApplied prints the warnings of the objects applied, reading the
// nodes, and the services of the Routes, through list when any object
// could have one.
func warnApplied(w io.Writer, objs []legion.Object, list lister) {
	if err := warnOf(w, objs, list); err != nil {
		fmt.Fprintf(w, "warning: what the nodes will do of this is not known: listing nodes: %v\n", err)
	}
	if err := warnUnrouted(w, objs, list); err != nil {
		fmt.Fprintf(w, "warning: whether the Routes lead to services is not known: %v\n", err)
	}
}

// warnListed prints, after legion get shows Routes, those no node
// serves and those that lead to no service, as apply does: whether it is
// served is what a Route's listing is read for; and of Services, the
// published ports a node cannot serve (the table's PORTS column shows
// what is asked). (Limits are warned of at apply only: a listing of
// services does not show them.) A user who may not list nodes or
// services is told nothing more: a listing is not the place to say what
// they cannot see.
func warnListed(w io.Writer, objs []legion.Object, list lister) {
	var routes []legion.Object
	var services []*legion.Service
	for _, o := range objs {
		switch x := o.(type) {
		case *legion.Route:
			routes = append(routes, o)
		case *legion.Service:
			services = append(services, x)
		}
	}
	_ = warnOf(w, routes, list)
	_ = warnUnrouted(w, routes, list)
	warnUnpublished(w, services, list)
}

// warnUnpublished prints, of each of the services, the published ports a
// node reports it cannot serve (another process of its host holds the
// port): ready tasks or not, the port answers with whatever holds it
// there. The nodes are read only when a service publishes a port; a user
// who may not read them is told nothing.
func warnUnpublished(w io.Writer, services []*legion.Service, list lister) {
	publishing := slices.DeleteFunc(slices.Clone(services), func(s *legion.Service) bool {
		return !slices.ContainsFunc(s.Spec.Endpoint.Ports, func(p legion.ServicePort) bool { return p.Publish != "" })
	})
	if len(publishing) == 0 {
		return
	}
	nodes, err := list(legion.KindNode, "")
	if err != nil {
		return
	}
	for _, s := range publishing {
		for _, p := range publishProblems(s, nodes) {
			fmt.Fprintf(w, "warning: service %s/%s: published port %d is not served on node %s: %s\n", s.Metadata.Namespace, s.Metadata.Name, p.Port, p.node, p.Error)
		}
	}
}

// routesOf is the Routes among objs.
func routesOf(objs []legion.Object) []*legion.Route {
	var routes []*legion.Route
	for _, o := range objs {
		if r, ok := o.(*legion.Route); ok {
			routes = append(routes, r)
		}
	}
	return routes
}

// warnOf prints what the nodes would leave undone of objs, reading the
// nodes through list when any object could have a warning.
func warnOf(w io.Writer, objs []legion.Object, list lister) error {
	routes := routesOf(objs)
	if len(routes) == 0 && !slices.ContainsFunc(objs, hasLimits) && !slices.ContainsFunc(objs, isPolicy) && !slices.ContainsFunc(objs, sized) {
		return nil
	}
	listed, err := list(legion.KindNode, "")
	if err != nil {
		return err
	}
	nodes := make([]*legion.Node, 0, len(listed))
	for _, o := range listed {
		nodes = append(nodes, o.(*legion.Node))
	}
	for _, msg := range slices.Concat(unservedRoutes(routes, nodes), unenforcedLimits(objs, nodes), unenforcedPolicies(objs, nodes), unenforcedSizes(objs, nodes)) {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	return nil
}

// unroutedRoutes says which of routes lead nowhere, services holding the
// Services of their namespaces: no Service of the name, or none of its
// ports the route can tell. The ingress answers their requests with 503
// until the route or the service changes.
func unroutedRoutes(routes []*legion.Route, services map[string][]*legion.Service) []string {
	var out []string
	for _, r := range routes {
		// A manifest's Route without a namespace is stored in the default.
		in := *r
		in.Metadata.Namespace = cmp.Or(in.Metadata.Namespace, legion.DefaultNamespace)
		var svc *legion.Service
		for _, s := range services[in.Metadata.Namespace] {
			if s.Metadata.Name == r.Spec.Service {
				svc = s
			}
		}
		if problem := endpoints.RouteProblem(&in, svc); problem != "" {
			out = append(out, fmt.Sprintf("%s: %s: the ingress answers its requests with 503 until that changes", ref(r), problem))
		}
	}
	return out
}

// warnUnrouted prints unroutedRoutes' warnings for the Routes among objs,
// listing the Services of each of their namespaces once.
func warnUnrouted(w io.Writer, objs []legion.Object, list lister) error {
	routes := routesOf(objs)
	services := map[string][]*legion.Service{}
	for _, r := range routes {
		ns := cmp.Or(r.Metadata.Namespace, legion.DefaultNamespace)
		if _, done := services[ns]; done {
			continue
		}
		listed, err := list(legion.KindService, ns)
		if err != nil {
			return err
		}
		services[ns] = []*legion.Service{}
		for _, o := range listed {
			services[ns] = append(services[ns], o.(*legion.Service))
		}
	}
	for _, msg := range unroutedRoutes(routes, services) {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
	return nil
}

// staleValues says, of the Secrets and Configs an apply updated, which
// workloads of their namespace have tasks that keep the old value: a task
// takes its Secrets and Configs (files and environment) when it starts,
// so only the tasks started after the change have the new one. A Job
// that is over starts no more tasks; a CronJob's next Jobs get the new
// value.
func staleValues(updated []legion.Object, list lister) ([]string, error) {
	var out []string
	// Each namespace's workloads are listed once, however many of its
	// Secrets and Configs changed.
	listed := map[[2]string][]legion.Object{}
	for _, v := range updated {
		kind, ns, name := v.GetKind(), v.GetMetadata().Namespace, v.GetMetadata().Name
		if kind != legion.KindSecret && kind != legion.KindConfig {
			continue
		}
		var users []string
		for _, k := range []legion.Kind{legion.KindService, legion.KindJob} {
			objs, ok := listed[[2]string{string(k), ns}]
			if !ok {
				var err error
				if objs, err = list(k, ns); err != nil {
					return out, err
				}
				listed[[2]string{string(k), ns}] = objs
			}
			for _, o := range objs {
				if j, ok := o.(*legion.Job); ok && j.Status.State.Over() {
					continue
				}
				uses := false
				if pod := legion.PodOf(o); pod != nil {
					pod.References(func(k legion.Kind, n, what string) {
						uses = uses || k == kind && n == name && what != legion.PullSecretRef
					})
				}
				if uses {
					users = append(users, strings.ToLower(string(o.GetKind()))+"/"+o.GetMetadata().Name)
				}
			}
		}
		if len(users) > 0 {
			out = append(out, fmt.Sprintf("%s: the tasks of %s that already run keep the value they started with, in files and environment, until they are replaced (legion rollout restart SERVICE replaces a service's in a rolling update, legion delete task NAME one task); tasks started from now on get this one",
				ref(v), strings.Join(users, ", ")))
		}
	}
	return out, nil
}

// warnStale prints staleValues' warnings for the results of an apply.
func warnStale(w io.Writer, res []client.Result, list lister) {
	var updated []legion.Object
	for _, r := range res {
		if r.Outcome == client.Updated {
			updated = append(updated, r.Object)
		}
	}
	msgs, err := staleValues(updated, list)
	for _, m := range msgs {
		fmt.Fprintf(w, "warning: %s\n", m)
	}
	if err != nil {
		fmt.Fprintf(w, "warning: which running tasks keep the old values is not known: %v\n", err)
	}
}

// listWith lists through the cluster's client.
func listWith(ctx context.Context, cl *client.Client) lister {
	return func(k legion.Kind, ns string) ([]legion.Object, error) {
		objs, _, err := cl.List(ctx, k, client.ListOptions{Namespace: ns})
		return objs, err
	}
}
