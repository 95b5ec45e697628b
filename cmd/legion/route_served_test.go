package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/daemon"
)

func TestUnservedRoutes(t *testing.T) {
	t.Parallel()
	route := func(name string, tls bool) *legion.Route {
		r := &legion.Route{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindRoute, Metadata: legion.Metadata{Name: name}}}
		if tls {
			r.Spec.TLS = &legion.RouteTLS{Secret: "cert"}
		}
		return r
	}
	node := func(state legion.NodeState, in *legion.NodeIngress) *legion.Node {
		n := &legion.Node{}
		n.Status.State, n.Status.Ingress = state, in
		return n
	}
	plain, secure := route("plain", false), route("secure", true)
	for _, tc := range []struct {
		name  string
		nodes []*legion.Node
		want  []string // the routes warned of
	}{
		{"no node serves", []*legion.Node{node(legion.NodeReady, nil)}, []string{"route/plain", "route/secure"}},
		{"HTTP only", []*legion.Node{node(legion.NodeReady, &legion.NodeIngress{HTTP: ":80"})}, []string{"route/secure"}},
		{"both, on two nodes", []*legion.Node{node(legion.NodeReady, &legion.NodeIngress{HTTP: ":80"}), node(legion.NodeReady, &legion.NodeIngress{HTTPS: ":443"})}, nil},
		{"the serving node is down", []*legion.Node{node(legion.NodeDown, &legion.NodeIngress{HTTP: ":80", HTTPS: ":443"})}, []string{"route/plain", "route/secure"}},
	} {
		var got []string
		for _, w := range unservedRoutes([]*legion.Route{plain, secure}, tc.nodes) {
			got = append(got, w[:strings.Index(w, ":")])
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: warned of %q, want %q", tc.name, got, tc.want)
		}
	}
	if w := unservedRoutes([]*legion.Route{secure}, nil); len(w) != 1 || !strings.Contains(w[0], "over HTTPS; start one with --ingress-tls-listen") {
		t.Errorf("an HTTPS route without a node: %q", w)
	}
}

// On a cluster, apply warns of a Route no node serves, and not once a
// node serves Routes; the node's description says where it does.
func TestApplyWarnsOfARouteNoNodeServes(t *testing.T) {
	const routeYAML = `
apiVersion: legion/v1
kind: Route
metadata: {name: web}
spec: {host: web.example.test, service: web, port: http}
`
	for _, tc := range []struct {
		name   string
		listen string
		warned bool
	}{{"without ingress", "", true}, {"with ingress", "127.0.0.1:0", false}} {
		t.Run(tc.name, func(t *testing.T) {
			n := startCluster(t, func(o *daemon.Options) { o.IngressListen = tc.listen })
			flags := []string{"--server", n.API, "--credentials", n.Admin}
			// The node registers as the daemon starts.
			waitFor(t, "the node registered", func() bool {
				out, err := runLegion(t, "", append([]string{"get", "nodes"}, flags...)...)
				return err == nil && strings.Contains(out, "ready")
			})
			out, err := runLegion(t, routeYAML, append([]string{"apply", "-f", "-"}, flags...)...)
			if err != nil || !strings.Contains(out, "route/web created") {
				t.Fatalf("apply: %v\n%s", err, out)
			}
			warned := strings.Contains(out, "warning: route/web: no ready node serves Routes over HTTP; start one with --ingress-listen")
			if warned != tc.warned {
				t.Errorf("warned %v, want %v:\n%s", warned, tc.warned, out)
			}
			desc, err := runLegion(t, "", append([]string{"describe", "node", n.Name}, flags...)...)
			if served := strings.Contains(desc, "Ingress:") && strings.Contains(desc, "serves Routes over HTTP at 127.0.0.1:0"); err != nil || served == tc.warned {
				t.Errorf("describe node (ingress %q): %v\n%s", tc.listen, err, desc)
			}
		})
	}
}
