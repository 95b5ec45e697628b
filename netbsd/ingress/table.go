package ingress

import (
	"cmp"
	"net"
	"net/http/httputil"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
)

// Route is one HTTP route as the proxy serves it.
type Route struct {
	Namespace, Name string
	// Host is lower case; "*.example.org" takes exactly one label in front.
	Host string
	// Path is a prefix of whole segments, "/" when empty: "/shop" takes
	// "/shop/cart", not "/shopping".
	Path string
	// Backends are host:port of the ready tasks, in order; none means 503.
	Backends []string
	// TLSSecret names the namespace's Secret holding the certificate chain
	// and key, "" for none.
	TLSSecret string
	// Challenges maps ACME HTTP-01 tokens to their key authorizations,
	// answered at /.well-known/acme-challenge/<token> for Host.
	Challenges map[string]string
	// TrustedProxies are the peers whose X-Forwarded-For, X-Forwarded-Proto
	// and Forwarded are believed; any other peer's are replaced.
	TrustedProxies []netip.Prefix
	// ProxyProtocol, "v1" or "v2", opens each backend connection with a
	// PROXY protocol header naming the client; such connections serve one
	// request each, since a kept one would carry the next client under
	// the first one's address.
	ProxyProtocol string
	// RedirectHTTPS answers plain HTTP with 308 to the same URL in https.
	RedirectHTTPS bool
}

// entry is a route in the table, with what serving it needs.
type entry struct {
	route Route
	path  string // normalised: leading "/", no trailing "/" except the root
	next  *atomic.Uint64
	proxy *httputil.ReverseProxy
}

// hostRoutes are the routes of one host (exact or wildcard), longest path
// first, with the ACME challenges any of them carries.
type hostRoutes struct {
	entries    []*entry
	challenges map[string]string
}

// table is immutable once built; SetRoutes swaps in a new one.
type table struct {
	exact    map[string]*hostRoutes // "a.example.org"
	wildcard map[string]*hostRoutes // "example.org" for "*.example.org"
	// The "namespace/secret" of each route with TLS of a host (or
	// wildcard suffix), in namespace/name order, each once.
	tlsExact map[string][]string
	tlsWild  map[string][]string
}

// normalisePath makes a route path comparable: "" and "/" are the root,
// "/shop/" is "/shop".
func normalisePath(p string) string {
	if p == "" {
		return "/"
	}
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if len(p) > 1 {
		p = strings.TrimRight(p, "/")
		if p == "" {
			p = "/"
		}
	}
	return p
}

// pathMatches says whether prefix (normalised) takes path as whole segments.
func pathMatches(prefix, path string) bool {
	if prefix == "/" {
		return true
	}
	if !strings.HasPrefix(path, prefix) {
		return false
	}
	return len(path) == len(prefix) || path[len(prefix)] == '/'
}

// requestHost is the Host header as routes name hosts: port dropped, lower
// case, no trailing dot.
func requestHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	} else if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// wildcardSuffix is what a "*." route would have to name to take host: the
// host without its first label, or "" when it has only one.
func wildcardSuffix(host string) string {
	_, rest, ok := strings.Cut(host, ".")
	if !ok || rest == "" {
		return ""
	}
	return rest
}

// buildTable sorts routes into hosts. A route's counter carries over from
// old (same namespace/name) so SetRoutes does not restart every rotation at
// the first backend. newProxy makes the reverse proxy serving one entry.
func buildTable(routes []Route, old *table, newProxy func(*entry) *httputil.ReverseProxy) *table {
	counters := map[string]*atomic.Uint64{}
	if old != nil {
		for _, group := range []map[string]*hostRoutes{old.exact, old.wildcard} {
			for _, hr := range group {
				for _, e := range hr.entries {
					counters[e.route.Namespace+"/"+e.route.Name+"\x00"+e.route.Host+"\x00"+e.path] = e.next
				}
			}
		}
	}
	t := &table{
		exact:    map[string]*hostRoutes{},
		wildcard: map[string]*hostRoutes{},
		tlsExact: map[string][]string{},
		tlsWild:  map[string][]string{},
	}
	// Sorted by namespace/name so that, of two routes claiming the same host
	// and path, or certificates of one host, the same one wins on every node.
	sorted := slices.Clone(routes)
	slices.SortStableFunc(sorted, func(a, b Route) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, r := range sorted {
		host := strings.TrimSuffix(strings.ToLower(r.Host), ".")
		if host == "" {
			continue
		}
		r.Host = host
		r.Backends = slices.Clone(r.Backends)
		group, key := t.exact, host
		tlsGroup := t.tlsExact
		if suffix, ok := strings.CutPrefix(host, "*."); ok {
			group, key, tlsGroup = t.wildcard, suffix, t.tlsWild
		}
		e := &entry{route: r, path: normalisePath(r.Path)}
		e.next = counters[r.Namespace+"/"+r.Name+"\x00"+host+"\x00"+e.path]
		if e.next == nil {
			e.next = new(atomic.Uint64)
		}
		e.proxy = newProxy(e)
		hr := group[key]
		if hr == nil {
			hr = &hostRoutes{challenges: map[string]string{}}
			group[key] = hr
		}
		hr.entries = append(hr.entries, e)
		for token, auth := range r.Challenges {
			if _, taken := hr.challenges[token]; !taken {
				hr.challenges[token] = auth
			}
		}
		if r.TLSSecret != "" {
			if k := r.Namespace + "/" + r.TLSSecret; !slices.Contains(tlsGroup[key], k) {
				tlsGroup[key] = append(tlsGroup[key], k)
			}
		}
	}
	for _, group := range []map[string]*hostRoutes{t.exact, t.wildcard} {
		for _, hr := range group {
			// Longest path first; equal paths keep namespace/name order.
			slices.SortStableFunc(hr.entries, func(a, b *entry) int {
				return cmp.Compare(len(b.path), len(a.path))
			})
		}
	}
	return t
}

// match finds the route for host (as requestHost gives it) and path: among
// the routes whose host and path both match, an exact host before a
// wildcard, then the longest path. nil when none does.
func (t *table) match(host, path string) *entry {
	if path == "" {
		path = "/"
	}
	if hr := t.exact[host]; hr != nil {
		for _, e := range hr.entries {
			if pathMatches(e.path, path) {
				return e
			}
		}
	}
	if suffix := wildcardSuffix(host); suffix != "" {
		if hr := t.wildcard[suffix]; hr != nil {
			for _, e := range hr.entries {
				if pathMatches(e.path, path) {
					return e
				}
			}
		}
	}
	return nil
}

// challenge is the key authorization for an ACME token of host, if a route
// of that host carries it.
func (t *table) challenge(host, token string) (string, bool) {
	if hr := t.exact[host]; hr != nil {
		if auth, ok := hr.challenges[token]; ok {
			return auth, true
		}
	}
	if suffix := wildcardSuffix(host); suffix != "" {
		if hr := t.wildcard[suffix]; hr != nil {
			if auth, ok := hr.challenges[token]; ok {
				return auth, true
			}
		}
	}
	return "", false
}

// certificateKeys are the "namespace/secret"s that may serve the SNI name
// host, in the order they are tried (namespace/name of their routes): the
// exact host's routes with TLS if it has any, else the wildcard's.
func (t *table) certificateKeys(host string) []string {
	if keys := t.tlsExact[host]; len(keys) > 0 {
		return keys
	}
	if suffix := wildcardSuffix(host); suffix != "" {
		return t.tlsWild[suffix]
	}
	return nil
}

// certificateConflicts names the hosts whose routes name several Secrets,
// sorted: only one certificate serves each name.
func (t *table) certificateConflicts() []string {
	var out []string
	for _, g := range []struct {
		keys   map[string][]string
		prefix string
	}{{t.tlsExact, ""}, {t.tlsWild, "*."}} {
		for host, keys := range g.keys {
			if len(keys) > 1 {
				out = append(out, g.prefix+host+": "+strings.Join(keys, ", "))
			}
		}
	}
	slices.Sort(out)
	return out
}

// backend is the next backend of e in turn, "" when it has none.
func (e *entry) backend() string {
	n := len(e.route.Backends)
	if n == 0 {
		return ""
	}
	i := e.next.Add(1) - 1
	return e.route.Backends[i%uint64(n)]
}
