package main

import (
	"context"
	"fmt"
	"io"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// unservedRoutes says which of routes no ready node serves: over HTTPS
// for a route with TLS, over HTTP for the others. A Route is stored
// either way; without a node serving it, nothing answers for its host,
// which "created" alone would not tell.
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

// warnUnservedRoutes prints unservedRoutes' warnings for the Routes among
// objs, reading the nodes through list.
func warnUnservedRoutes(w io.Writer, objs []legion.Object, list func(legion.Kind) ([]legion.Object, error)) {
	var routes []*legion.Route
	for _, o := range objs {
		if r, ok := o.(*legion.Route); ok {
			routes = append(routes, r)
		}
	}
	if len(routes) == 0 {
		return
	}
	objsOfNodes, err := list(legion.KindNode)
	if err != nil {
		fmt.Fprintf(w, "warning: whether a node serves the Routes is not known: listing nodes: %v\n", err)
		return
	}
	nodes := make([]*legion.Node, 0, len(objsOfNodes))
	for _, o := range objsOfNodes {
		nodes = append(nodes, o.(*legion.Node))
	}
	for _, msg := range unservedRoutes(routes, nodes) {
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
}

// listWith lists a kind through the cluster's client.
func listWith(ctx context.Context, cl *client.Client) func(legion.Kind) ([]legion.Object, error) {
	return func(k legion.Kind) ([]legion.Object, error) {
		objs, _, err := cl.List(ctx, k, client.ListOptions{})
		return objs, err
	}
}

// warnRoutes warns of the applied Routes (named by a brief apply's
// results) that no node serves, reading them back for their TLS.
func (c *clusterCLI) warnRoutes(cmd *cobra.Command, applied []legion.Object) error {
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx := ctxOf(cmd)
	var routes []legion.Object
	for _, o := range applied {
		m := o.GetMetadata()
		r, err := cl.Get(ctx, legion.KindRoute, m.Namespace, m.Name)
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "warning: whether a node serves %s is not known: %v\n", ref(o), err)
			continue
		}
		routes = append(routes, r)
	}
	warnUnservedRoutes(cmd.ErrOrStderr(), routes, listWith(ctx, cl))
	return nil
}
