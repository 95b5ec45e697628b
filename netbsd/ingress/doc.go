// Package ingress is the node's HTTP proxy for Route objects: it picks a
// route by the request's Host and path, sends the request to the route's
// ready backends in turn over kept-alive HTTP/1.1, answers ACME HTTP-01
// challenges for the route's host, and terminates TLS with a certificate
// chosen by SNI.
//
// The agent feeds it: SetRoutes with the routes as the dispatcher streams
// them (backends already resolved to task address and target port), and
// SetCertificates with the certificates parsed (ParseCertificate) from the
// Secrets the routes name. Both swap an immutable table atomically, so they
// may be called at any time while Serve and ServeTLS run.
//
// What clients get: 404 when no route takes the host and path, 503 when the
// route has no ready backend, 502 when the backend refuses or cannot be
// reached, 504 when it sends no headers within Proxy.HeaderTimeout (5 s).
// Upgrades (WebSocket) pass through on HTTP/1.1. Serve speaks HTTP/1.1 and
// cleartext HTTP/2 (by its preface), ServeTLS both by ALPN; backends always
// get HTTP/1.1 with X-Forwarded-For, -Host and -Proto, and the Host the
// client asked for.
//
// The package is a library with no knowledge of the cluster: it imports the
// standard library, go-proxyproto and golang.org/x/net/http/httpguts (the
// request checks net/http's server makes), never the legion object model
// nor the agent.
package ingress
