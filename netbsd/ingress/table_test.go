package ingress

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPathMatchesWholeSegments(t *testing.T) {
	tests := []struct {
		prefix, path string
		want         bool
	}{
		{"/", "/", true},
		{"/", "/anything/at/all", true},
		{"/shop", "/shop", true},
		{"/shop", "/shop/", true},
		{"/shop", "/shop/cart", true},
		{"/shop", "/shopping", false},
		{"/shop", "/sho", false},
		{"/shop/cart", "/shop", false},
	}
	for _, tt := range tests {
		if got := pathMatches(tt.prefix, tt.path); got != tt.want {
			t.Errorf("pathMatches(%q, %q) = %v, want %v", tt.prefix, tt.path, got, tt.want)
		}
	}
}

func TestNormalisePathAndHost(t *testing.T) {
	paths := map[string]string{"": "/", "/": "/", "/shop/": "/shop", "shop": "/shop", "//": "/", "/a/b": "/a/b"}
	got := map[string]string{}
	for in := range paths {
		got[in] = normalisePath(in)
	}
	if d := cmp.Diff(paths, got); d != "" {
		t.Errorf("normalisePath (-want +got):\n%s", d)
	}
	hosts := map[string]string{
		"a.example":      "a.example",
		"A.Example:8080": "a.example",
		"a.example.":     "a.example",
		"[::1]:80":       "::1",
		"[::1]":          "::1",
		"127.0.0.1:80":   "127.0.0.1",
	}
	got = map[string]string{}
	for in := range hosts {
		got[in] = requestHost(in)
	}
	if d := cmp.Diff(hosts, got); d != "" {
		t.Errorf("requestHost (-want +got):\n%s", d)
	}
}

// Routing through the proxy over real HTTP: exact host before wildcard,
// longest path of whole segments, port and case ignored, 404 and 503.
func TestRouting(t *testing.T) {
	be := map[string]string{}
	for _, name := range []string{"root", "shop", "wild", "wildapi", "only"} {
		be[name] = addr(namedBackend(t, name))
	}
	p := &Proxy{}
	p.SetRoutes([]Route{
		{Namespace: "shop", Name: "root", Host: "a.example", Backends: []string{be["root"]}},
		{Namespace: "shop", Name: "cart", Host: "a.example", Path: "/shop", Backends: []string{be["shop"]}},
		{Namespace: "shop", Name: "wild", Host: "*.example", Path: "/", Backends: []string{be["wild"]}},
		{Namespace: "shop", Name: "wildapi", Host: "*.example", Path: "/api/", Backends: []string{be["wildapi"]}},
		{Namespace: "shop", Name: "empty", Host: "empty.example", Path: "/"},
		{Namespace: "shop", Name: "only", Host: "x.example", Path: "/only", Backends: []string{be["only"]}},
	})
	proxyAddr := startProxy(t, p, false)
	c := client(t)
	tests := []struct {
		host, path string
		want       result
	}{
		{"a.example", "/", result{200, "root", "root /"}},
		{"a.example", "/shop", result{200, "shop", "shop /shop"}},
		{"a.example", "/shop/", result{200, "shop", "shop /shop/"}},
		{"a.example", "/shop/cart", result{200, "shop", "shop /shop/cart"}},
		{"a.example", "/shopping", result{200, "root", "root /shopping"}},
		{"A.EXAMPLE:8080", "/shop/cart", result{200, "shop", "shop /shop/cart"}},
		{"a.example.", "/", result{200, "root", "root /"}},
		{"b.example", "/", result{200, "wild", "wild /"}},
		{"B.Example:80", "/api/v1", result{200, "wildapi", "wildapi /api/v1"}},
		{"b.example", "/apis", result{200, "wild", "wild /apis"}},
		// The exact host's paths do not take "/", so its wildcard does.
		{"x.example", "/only/1", result{200, "only", "only /only/1"}},
		{"x.example", "/", result{200, "wild", "wild /"}},
		// A wildcard takes exactly one label.
		{"c.b.example", "/", result{Status: http.StatusNotFound}},
		{"example", "/", result{Status: http.StatusNotFound}},
		{"other.org", "/", result{Status: http.StatusNotFound}},
		{"empty.example", "/", result{Status: http.StatusServiceUnavailable}},
	}
	for _, tt := range tests {
		got, _ := get(t, c, "http", proxyAddr, tt.host, tt.path, nil)
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("GET %s%s (-want +got):\n%s", tt.host, tt.path, d)
		}
	}
}

// Before any SetRoutes everything is 404.
func TestZeroProxyServesNotFound(t *testing.T) {
	proxyAddr := startProxy(t, &Proxy{}, false)
	got, _ := get(t, client(t), "http", proxyAddr, "a.example", "/", nil)
	if got.Status != http.StatusNotFound {
		t.Errorf("status %d, want 404", got.Status)
	}
}

func TestDefaults(t *testing.T) {
	p := &Proxy{}
	p.init()
	got := []any{p.HeaderTimeout, p.IdleTimeout, p.GracePeriod, p.transport.IdleConnTimeout, p.transport.ResponseHeaderTimeout, p.transport.Proxy == nil}
	want := []any{DefaultHeaderTimeout, DefaultIdleTimeout, DefaultGracePeriod, DefaultIdleTimeout, DefaultHeaderTimeout, true}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("defaults (-want +got):\n%s", d)
	}
}
