// Package acme keeps the certificates of Routes (5.8): on the leader it
// orders and renews them from an ACME authority with HTTP-01 validation
// answered by the ingress proxies, and it says in each TLS Route's status
// whether the certificate its Secret holds covers the route's host.
//
// plan.go is the decision, free of I/O and clocks: which Routes share a
// certificate, whether one is due, and what their status says.
// controller.go does the talking and the writing.
package acme

import (
	"cmp"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
)

// Retries of a certificate whose order failed: the first after
// RetryFirst, twice as long after each further failure in a row, never
// more than RetryMax. Let's Encrypt counts failed validations per hour,
// so this stays well inside its limits.
const (
	RetryFirst = 10 * time.Minute
	RetryMax   = 24 * time.Hour
)

// failedPrefix starts the status message of a group whose last order
// failed; a new leader reads it back to keep the wait.
const failedPrefix = "order failed: "

// Group is the Routes naming one Secret of one namespace: they share its
// certificate, which must cover all their hosts.
type Group struct {
	Namespace, Secret string
	Hosts             []string        // sorted, each once
	Routes            []*legion.Route // by name
	// ACME is the settings of the first route (by name) asking for
	// ACME; nil when none does, and the Secret is the user's to fill.
	ACME *legion.RouteACME
	// Conflict says which routes ask for other ACME settings than ACME.
	Conflict string
}

// Key is "namespace/secret".
func (g *Group) Key() string { return g.Namespace + "/" + g.Secret }

// input is what an order depends on: when it changes, a failed order's
// wait starts over.
func (g *Group) input() string {
	if g.ACME == nil {
		return ""
	}
	return strings.Join(g.Hosts, ",") + "|" + g.ACME.Directory + "|" + g.ACME.Email
}

// Groups gathers the routes with TLS by the Secret they name, in
// namespace and secret order.
func Groups(routes []*legion.Route) []*Group {
	byKey := map[string]*Group{}
	var out []*Group
	sorted := slices.Clone(routes)
	slices.SortFunc(sorted, func(a, b *legion.Route) int {
		return cmp.Or(cmp.Compare(a.Metadata.Namespace, b.Metadata.Namespace), cmp.Compare(a.Metadata.Name, b.Metadata.Name))
	})
	for _, r := range sorted {
		if r.Spec.TLS == nil || r.Spec.TLS.Secret == "" {
			continue
		}
		key := r.Metadata.Namespace + "/" + r.Spec.TLS.Secret
		g := byKey[key]
		if g == nil {
			g = &Group{Namespace: r.Metadata.Namespace, Secret: r.Spec.TLS.Secret}
			byKey[key] = g
			out = append(out, g)
		}
		g.Routes = append(g.Routes, r)
		if !slices.Contains(g.Hosts, r.Spec.Host) {
			g.Hosts = append(g.Hosts, r.Spec.Host)
		}
		if a := r.Spec.TLS.ACME; a != nil {
			switch {
			case g.ACME == nil:
				g.ACME = a
			case *a != *g.ACME:
				if g.Conflict != "" {
					g.Conflict += ", "
				}
				g.Conflict += r.Metadata.Name
			}
		}
	}
	for _, g := range out {
		slices.Sort(g.Hosts)
	}
	slices.SortFunc(out, func(a, b *Group) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Secret, b.Secret))
	})
	return out
}

// ErrNoCertificate is what ReadCertificate says of a value holding no
// CERTIFICATE block.
var ErrNoCertificate = errors.New("no CERTIFICATE block")

// ReadCertificate is the leaf (the first certificate) of a Secret's PEM.
func ReadCertificate(data []byte) (*x509.Certificate, error) {
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, ErrNoCertificate
		}
		if block.Type == "CERTIFICATE" {
			leaf, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("leaf certificate: %w", err)
			}
			return leaf, nil
		}
	}
}

// Uncovered lists the hosts the certificate is not valid for. A route's
// "*.example.org" takes any one label in front, so only a certificate
// naming that wildcard covers it.
func Uncovered(leaf *x509.Certificate, hosts []string) []string {
	var out []string
	for _, h := range hosts {
		if strings.HasPrefix(h, "*.") {
			if !slices.ContainsFunc(leaf.DNSNames, func(n string) bool { return strings.EqualFold(n, h) }) {
				out = append(out, h)
			}
			continue
		}
		if leaf.VerifyHostname(h) != nil {
			out = append(out, h)
		}
	}
	return out
}

// RenewAt is when a certificate is renewed: two thirds into its life (60
// days of Let's Encrypt's 90).
func RenewAt(leaf *x509.Certificate) time.Time {
	life := leaf.NotAfter.Sub(leaf.NotBefore)
	return leaf.NotBefore.Add(life * 2 / 3)
}

// Failure is a group's run of failed orders for one input.
type Failure struct {
	Input string
	Count int // in a row
	Next  time.Time
	Err   string
}

// RetryDelay is how long to wait after count failures in a row.
func RetryDelay(first, limit time.Duration, count int) time.Duration {
	d := first
	for i := 1; i < count && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// SecretState is what the named Secret holds, as Decide needs it.
type SecretState struct {
	Exists bool
	Empty  bool              // exists with no value
	Leaf   *x509.Certificate // nil: none readable
	Err    error             // why Leaf is nil for a Secret with a value
}

// ReadSecret reads a Secret's value (nil: no such Secret).
func ReadSecret(s *legion.Secret) SecretState {
	if s == nil {
		return SecretState{}
	}
	st := SecretState{Exists: true, Empty: len(s.Spec.Data) == 0}
	if !st.Empty {
		st.Leaf, st.Err = ReadCertificate(s.Spec.Data)
	}
	return st
}

// Decision is what to do for a group now, and the status its routes get
// meanwhile (an order's outcome replaces it).
type Decision struct {
	Order  bool
	Reason string // why an order is due
	Status legion.RouteStatus
}

// Decide says whether a group needs an order and what its routes' status
// is. fail is the group's failed orders for its current input, if any.
func Decide(g *Group, sec SecretState, fail *Failure, now time.Time) Decision {
	var d Decision
	var expires *time.Time
	if sec.Leaf != nil {
		t := sec.Leaf.NotAfter
		expires = &t
	}
	if g.ACME == nil {
		d.Status = userStatus(g, sec)
		return d
	}
	switch {
	case sec.Exists && !sec.Empty && sec.Leaf == nil:
		d.Status.Message = fmt.Sprintf("secret %s holds no certificate (%v): left alone, so a mistyped name cannot wipe another Secret; name a new or empty Secret", g.Secret, sec.Err)
		return d
	case sec.Leaf == nil:
		d.Order, d.Reason = true, "no certificate in secret "+g.Secret
	case len(Uncovered(sec.Leaf, g.Hosts)) > 0:
		d.Order, d.Reason = true, "the certificate in secret "+g.Secret+" does not cover "+strings.Join(Uncovered(sec.Leaf, g.Hosts), ", ")
	case !now.Before(RenewAt(sec.Leaf)):
		d.Order, d.Reason = true, "renewal due"
	default:
		d.Status = Issued(g, sec.Leaf)
	}
	if d.Order {
		d.Status = legion.RouteStatus{Expires: expires, Message: "ordering a certificate: " + d.Reason}
	}
	if d.Order && fail != nil && fail.Input == g.input() && now.Before(fail.Next) {
		next := fail.Next
		d.Order, d.Reason = false, ""
		d.Status = legion.RouteStatus{Expires: expires, NextOrder: &next,
			Message: fmt.Sprintf("%s%s; next attempt at %s", failedPrefix, fail.Err, next.UTC().Format(time.RFC3339))}
	}
	if g.Conflict != "" {
		d.Status.Message = withNote(d.Status.Message,
			fmt.Sprintf("routes %s ask for other ACME settings than the first route naming secret %s: its settings are used", g.Conflict, g.Secret))
	}
	return d
}

// Issued is the status of a group whose Secret holds a certificate
// covering all its hosts.
func Issued(g *Group, leaf *x509.Certificate) legion.RouteStatus {
	t, renew := leaf.NotAfter, RenewAt(leaf)
	return legion.RouteStatus{Expires: &t, NextOrder: &renew,
		Message: fmt.Sprintf("certificate for %s valid until %s; renewed from %s", strings.Join(g.Hosts, ", "),
			t.UTC().Format(time.RFC3339), renew.UTC().Format(time.RFC3339))}
}

// userStatus is the status of routes whose Secret the user fills: whether
// it holds a certificate covering all their hosts.
func userStatus(g *Group, sec SecretState) legion.RouteStatus {
	switch {
	case !sec.Exists:
		return legion.RouteStatus{Message: "secret " + g.Secret + " not found: no certificate is served"}
	case sec.Leaf == nil:
		why := "empty"
		if sec.Err != nil {
			why = sec.Err.Error()
		}
		return legion.RouteStatus{Message: fmt.Sprintf("secret %s holds no certificate (%s): none is served", g.Secret, why)}
	}
	t := sec.Leaf.NotAfter
	if bad := Uncovered(sec.Leaf, g.Hosts); len(bad) > 0 {
		return legion.RouteStatus{Expires: &t, Message: fmt.Sprintf("the certificate in secret %s does not cover %s: the proxies do not serve it for that host",
			g.Secret, strings.Join(bad, ", "))}
	}
	return legion.RouteStatus{Expires: &t}
}

// RouteStatus is the status one route of the group gets from the group's
// status: the challenges of its own host only.
func RouteStatus(r *legion.Route, group legion.RouteStatus, challenges []legion.ACMEChallenge) legion.RouteStatus {
	out := group
	out.Challenges = nil
	for _, c := range challenges {
		if c.Host == r.Spec.Host {
			out.Challenges = append(out.Challenges, c)
		}
	}
	return out
}

// HostConflicts says, for each host whose routes name more than one
// Secret, which ones: every proxy serves the first (by the routes'
// namespace and name) whose certificate covers the name asked.
func HostConflicts(groups []*Group) map[string]string {
	secrets := map[string][]string{}
	for _, g := range groups {
		for _, r := range g.Routes {
			if k := g.Key(); !slices.Contains(secrets[r.Spec.Host], k) {
				secrets[r.Spec.Host] = append(secrets[r.Spec.Host], k)
			}
		}
	}
	out := map[string]string{}
	for host, keys := range secrets {
		if len(keys) > 1 {
			slices.Sort(keys)
			out[host] = fmt.Sprintf("routes of %s name secrets %s: the proxies serve the first, by route namespace and name, whose certificate covers the name",
				host, strings.Join(keys, ", "))
		}
	}
	return out
}

// withNote adds a sentence to a status message.
func withNote(msg, note string) string {
	if msg == "" {
		return note
	}
	return msg + "; " + note
}

// ResumeFailure reads a failed order's wait back from a route's status
// (after a change of leader), so the new leader does not order at once.
func ResumeFailure(g *Group, now time.Time) *Failure {
	if g.ACME == nil || len(g.Routes) == 0 {
		return nil
	}
	s := g.Routes[0].Status
	if s.NextOrder == nil || !now.Before(*s.NextOrder) || !strings.HasPrefix(s.Message, failedPrefix) {
		return nil
	}
	msg := strings.TrimPrefix(s.Message, failedPrefix)
	if i := strings.LastIndex(msg, "; next attempt at "); i >= 0 {
		msg = msg[:i]
	}
	return &Failure{Input: g.input(), Count: 1, Next: *s.NextOrder, Err: msg}
}
