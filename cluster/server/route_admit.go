package server

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/acme"
	"github.com/legionbsd/legion/cluster/store"
)

// admitRouteCertificates refuses a changed Route with TLS whose Secret
// exists (in the apply or stored) and does not hold a certificate for the
// route's host, which the proxies would never serve for it. A route with
// ACME may name a Secret holding another host's certificate (the leader
// orders one covering every host naming it) or an empty one, but not one
// holding something else, which the leader leaves alone (5.8). A missing
// Secret may come later; the route's status says so meanwhile.
func admitRouteCertificates(st *store.Store, a *admission) ([]string, error) {
	var errs []string
	for _, c := range a.changed {
		r, ok := c.obj.(*legion.Route)
		if !ok || r.Spec.TLS == nil || r.Spec.TLS.Secret == "" {
			continue
		}
		ns, name := r.Metadata.Namespace, r.Spec.TLS.Secret
		sec, err := secretAfterApply(st, a, ns, name)
		if err != nil {
			return nil, err
		}
		if sec == nil || len(sec.Spec.Data) == 0 {
			continue
		}
		refuse := func(format string, args ...any) {
			errs = append(errs, fmt.Sprintf("Route %s: spec.tls.secret: ", legion.DisplayName(r))+fmt.Sprintf(format, args...))
		}
		leaf, err := acme.ReadCertificate(sec.Spec.Data)
		switch {
		case errors.Is(err, acme.ErrNoCertificate) && r.Spec.TLS.ACME != nil:
			refuse("secret %s holds no certificate, and the leader does not replace it: name a new or empty Secret for the ACME certificate", name)
		case errors.Is(err, acme.ErrNoCertificate):
			refuse("secret %s holds no certificate: give it the certificate chain and key in PEM", name)
		case err != nil:
			refuse("secret %s: %v", name, err)
		case r.Spec.TLS.ACME == nil && len(acme.Uncovered(leaf, []string{r.Spec.Host})) > 0:
			refuse("the certificate in secret %s (for %s) does not cover host %s", name, certNames(leaf.DNSNames, leaf.Subject.CommonName), r.Spec.Host)
		}
	}
	return errs, nil
}

// secretAfterApply is Secret ns/name as the apply leaves it: its own,
// else the stored one; nil when there is none.
func secretAfterApply(st *store.Store, a *admission, ns, name string) (*legion.Secret, error) {
	for _, it := range a.items {
		if s, ok := it.obj.(*legion.Secret); ok && s.Metadata.Namespace == ns && s.Metadata.Name == name {
			return s, nil
		}
	}
	o, _, err := st.Get(legion.KindSecret, ns, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return o.(*legion.Secret), nil
}

func certNames(dns []string, cn string) string {
	if len(dns) == 0 {
		return cn
	}
	return strings.Join(dns, ", ")
}

// admitACMEDirectories refuses a namespace user's Route whose ACME
// directory is on the managers' loopback: the leader fetches the
// directory and posts to what it names, so such a route would have it
// call the managers' own local services (plain http is allowed there at
// all only for tests, which the cluster admin runs). Another https
// directory is the user's to choose, as with cert-manager's namespaced
// Issuers.
func admitACMEDirectories(_ *store.Store, a *admission) ([]string, error) {
	if !a.user {
		return nil, nil
	}
	var errs []string
	for _, c := range a.changed {
		r, ok := c.obj.(*legion.Route)
		if !ok || r.Spec.TLS == nil || r.Spec.TLS.ACME == nil {
			continue
		}
		u, err := url.Parse(r.Spec.TLS.ACME.Directory)
		if err == nil && legion.IsLoopbackHost(u.Hostname()) {
			errs = append(errs, fmt.Sprintf("Route %s: spec.tls.acme.directory: %q is on the managers' loopback, which only the cluster admin may name (for tests)",
				legion.DisplayName(r), r.Spec.TLS.ACME.Directory))
		}
	}
	return errs, nil
}
