package legion

import "time"

// Route sends HTTP requests for a host and path prefix to a service of its
// namespace, through every node's ingress proxy.
type Route struct {
	Header
	Spec   RouteSpec   `json:"spec"`
	Status RouteStatus `json:"status,omitzero"`
}

// RouteSpec is what the user asks of a route.
type RouteSpec struct {
	Host    string    `json:"host"` // lower case; *.example.org takes one label in front
	Path    string    `json:"path"` // a prefix of whole segments
	Service string    `json:"service"`
	Port    PortRef   `json:"port,omitzero"` // the service's port, needed when it has several TCP ports
	TLS     *RouteTLS `json:"tls,omitempty"`
	// TrustedProxies are the proxies in front of the ingress (CIDRs) whose
	// X-Forwarded-For, X-Forwarded-Proto and Forwarded the route believes;
	// from any other peer those headers are replaced, so a client cannot
	// choose the address a backend sees.
	TrustedProxies []string `json:"trustedProxies,omitempty"`
	// ProxyProtocol, v1 or v2, has the proxy open every backend connection
	// with a PROXY protocol header naming the client, for backends that
	// read the client's address there rather than from headers.
	ProxyProtocol string `json:"proxyProtocol,omitempty"`
}

// The PROXY protocol versions a Route may send its backends.
const (
	ProxyProtocolV1 = "v1"
	ProxyProtocolV2 = "v2"
)

// RouteTLS names the Secret holding the certificate chain and key in PEM,
// and optionally has the leader keep it from an ACME authority.
type RouteTLS struct {
	Secret string     `json:"secret"`
	ACME   *RouteACME `json:"acme,omitempty"`
	// Redirect answers plain HTTP requests of the route with a permanent
	// redirect (308) to the same URL over HTTPS.
	Redirect bool `json:"redirect,omitempty"`
}

// RouteACME orders certificates with HTTP-01 validation.
type RouteACME struct {
	Email     string `json:"email"`
	Directory string `json:"directory"`
}

// LetsEncryptDirectory is the default ACME directory.
const LetsEncryptDirectory = "https://acme-v02.api.letsencrypt.org/directory"

// RouteStatus is the state of a route's certificate.
type RouteStatus struct {
	Challenges []ACMEChallenge `json:"challenges,omitempty"`
	Expires    *time.Time      `json:"expires,omitempty"`
	NextOrder  *time.Time      `json:"nextOrder,omitempty"`
	Message    string          `json:"message,omitempty"`
}

// ACMEChallenge is an HTTP-01 token every proxy answers for the host.
type ACMEChallenge struct {
	Host             string `json:"host"`
	Token            string `json:"token"`
	KeyAuthorization string `json:"keyAuthorization"`
}
