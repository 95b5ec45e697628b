package server

import (
	"context"
	"testing"

	"github.com/legionbsd/legion"
	"google.golang.org/grpc/codes"
)

func routeFor(ns, name, host, path string) string {
	return `apiVersion: legion/v1
kind: Route
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec: {host: "` + host + `", path: ` + path + `, service: web}
`
}

// TestAdmissionRouteHosts: a host's routes are in one namespace; another
// namespace's route for it, for a path of it, under its wildcard or as a
// wildcard over it is refused, naming the route that holds it.
func TestAdmissionRouteHosts(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	ctx := context.Background()
	applyOK(t, c, routeFor("shop", "web", "shop.example.org", "/"))
	applyOK(t, c, routeFor("shop", "api", "shop.example.org", "/api")) // the same namespace, another path
	applyOK(t, c, routeFor("shop", "web", "shop.example.org", "/"))    // itself again
	held := "is routed by namespace shop (route "
	for _, tc := range []struct{ name, yaml string }{
		{"the same host and path", routeFor("evil", "web", "shop.example.org", "/")},
		{"a longer path of it", routeFor("evil", "login", "shop.example.org", "/login")},
		{"a wildcard over it", routeFor("evil", "all", "*.example.org", "/")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			applyRefused(t, m, c, tc.yaml, codes.AlreadyExists, "spec.host: ", held, "a host's routes are all in one namespace")
		})
	}
	applyOK(t, c, routeFor("apps", "all", "*.apps.example.org", "/"))
	applyRefused(t, m, c, routeFor("evil", "one", "one.apps.example.org", "/"), codes.AlreadyExists,
		"spec.host: one.apps.example.org is routed by namespace apps (route all, host *.apps.example.org)")
	// Two labels in front are not the wildcard's.
	applyOK(t, c, routeFor("evil", "deep", "a.b.apps.example.org", "/"))
	// A namespace's wildcard over its own host still may not cover
	// another's.
	applyOK(t, c, routeFor("blue", "x", "x.team.example.org", "/"))
	applyOK(t, c, routeFor("green", "y", "y.team.example.org", "/"))
	applyRefused(t, m, c, routeFor("blue", "all", "*.team.example.org", "/"), codes.AlreadyExists,
		"spec.host: *.team.example.org is routed by namespace green (route y, host y.team.example.org)")
	// Two namespaces in one apply.
	applyRefused(t, m, c, routeFor("pa", "x", "new.example.net", "/")+"---\n"+routeFor("pb", "x", "new.example.net", "/x"),
		codes.AlreadyExists, "new.example.net is routed by namespace pa (route x, host new.example.net)")
	// Moving the route to another host frees it; so does deleting it.
	applyOK(t, c, routeFor("shop", "api", "api.example.com", "/api"))
	if _, err := c.Delete(ctx, legion.KindRoute, "shop", "web", nil); err != nil {
		t.Fatal(err)
	}
	applyOK(t, c, routeFor("evil", "web", "shop.example.org", "/"))
}

func TestHostsOverlap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a.example.org", "a.example.org", true},
		{"a.example.org", "b.example.org", false},
		{"*.example.org", "a.example.org", true},
		{"a.example.org", "*.example.org", true},
		{"*.example.org", "a.b.example.org", false},
		{"*.example.org", "example.org", false},
		{"*.example.org", "*.example.org", true},
		{"*.example.org", "*.a.example.org", false},
		{"*.example.org", "aexample.org", false},
	} {
		if got := hostsOverlap(c.a, c.b); got != c.want {
			t.Errorf("hostsOverlap(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
