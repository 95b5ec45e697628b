package endpoints

import (
	"net"
	"sort"
	"strconv"

	"github.com/legionbsd/legion"
)

// Route is an HTTP route as every node's ingress proxy serves it (5.8):
// its host and path, and the ready tasks of its service at the port it
// names.
type Route struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Host      string   `json:"host"`
	Path      string   `json:"path"`
	Backends  []string `json:"backends,omitempty"` // host:port, in task order
	// Problem says why a route has no backends although its service has
	// ready tasks (a port it cannot tell).
	Problem string `json:"problem,omitempty"`
	// TLSSecret names the Secret of the namespace holding the route's
	// certificate chain and key.
	TLSSecret string `json:"tlsSecret,omitempty"`
	// Challenges are the ACME HTTP-01 tokens to answer, token to key
	// authorization.
	Challenges map[string]string `json:"challenges,omitempty"`
	// TrustedProxies, ProxyProtocol and RedirectHTTPS are the route's
	// spec.trustedProxies, spec.proxyProtocol and spec.tls.redirect.
	TrustedProxies []string `json:"trustedProxies,omitempty"`
	ProxyProtocol  string   `json:"proxyProtocol,omitempty"`
	RedirectHTTPS  bool     `json:"redirectHTTPS,omitempty"`
}

// ComputeRoutes resolves every route against the services' endpoints, in
// namespace and name order.
func ComputeRoutes(routes []*legion.Route, services []Service) []Route {
	byName := make(map[string]Service, len(services))
	for _, s := range services {
		byName[s.Namespace+"/"+s.Name] = s
	}
	out := make([]Route, 0, len(routes))
	for _, r := range routes {
		rt := Route{Namespace: r.Metadata.Namespace, Name: r.Metadata.Name, Host: r.Spec.Host, Path: r.Spec.Path,
			TrustedProxies: r.Spec.TrustedProxies, ProxyProtocol: r.Spec.ProxyProtocol}
		if rt.Path == "" {
			rt.Path = "/"
		}
		if r.Spec.TLS != nil {
			rt.TLSSecret, rt.RedirectHTTPS = r.Spec.TLS.Secret, r.Spec.TLS.Redirect
		}
		for _, c := range r.Status.Challenges {
			if c.Host == r.Spec.Host {
				if rt.Challenges == nil {
					rt.Challenges = map[string]string{}
				}
				rt.Challenges[c.Token] = c.KeyAuthorization
			}
		}
		s, ok := byName[rt.Namespace+"/"+r.Spec.Service]
		if ok {
			port, problem := routePort(s, r.Spec.Port)
			rt.Problem = problem
			if port > 0 {
				for _, t := range s.Tasks {
					rt.Backends = append(rt.Backends, net.JoinHostPort(t.IP, strconv.Itoa(port)))
				}
			}
		}
		out = append(out, rt)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return out
}

// RouteProblem says why route r leads nowhere whatever its service's
// tasks, s its service (nil: there is none): the service is missing, or
// has no port the route can tell. It is empty when the route resolves.
func RouteProblem(r *legion.Route, s *legion.Service) string {
	if s == nil {
		return "no service " + r.Spec.Service + " in namespace " + r.Metadata.Namespace
	}
	_, problem := routePort(Head(s), r.Spec.Port)
	return problem
}

// routePort is the tasks' port behind the service port a route names, or
// the service's only TCP port when it names none.
func routePort(s Service, ref legion.PortRef) (int, string) {
	var tcp []Port
	for _, p := range s.Ports {
		if p.Protocol == legion.TCP || p.Protocol == "" {
			tcp = append(tcp, p)
		}
	}
	if ref.IsZero() {
		switch len(tcp) {
		case 1:
			return tcp[0].TargetPort, ""
		case 0:
			return 0, "service " + s.Name + " has no TCP port"
		}
		return 0, "service " + s.Name + " has several TCP ports: the route must name one"
	}
	for _, p := range tcp {
		if (ref.Name != "" && p.Name == ref.Name) || (ref.Name == "" && p.Port == ref.Number) {
			return p.TargetPort, ""
		}
	}
	return 0, "service " + s.Name + " has no TCP port " + ref.String()
}
