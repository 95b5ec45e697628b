package main

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/legionbsd/legion/internal/daemon"
)

// A Route on a real one-node cluster: the node's ingress proxy sends a
// request for the route's host to the service's ready task, and a host
// no route names gets 404.
func TestRouteServedByTheIngressProxy(t *testing.T) {
	n, _ := helloCluster(t, helloApp("site", `        env: [{name: NAME, value: "served by the route"}]
`+readyHTTP+`  endpoint:
    ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: legion/v1
kind: Route
metadata: {name: site}
spec: {host: site.test, path: /, service: site}
`), func(o *daemon.Options) { o.IngressListen = "127.0.0.1:0" })
	if len(n.Ingress) != 1 {
		t.Fatalf("ingress listens at %v, want one address", n.Ingress)
	}
	get := func(host string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+n.Ingress[0]+"/", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var code int
	var body string
	waitFor(t, "the route answering", func() bool {
		code, body = get("site.test")
		return code == http.StatusOK
	})
	if !strings.Contains(body, "served by the route") {
		t.Fatalf("the route answered %d %q", code, body)
	}
	if code, _ := get("nothing.test"); code != http.StatusNotFound {
		t.Errorf("a host no route names: %d, want 404", code)
	}
}
