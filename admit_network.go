package legion

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/netip"
	"net/url"
	"path"
	"strings"

	"github.com/robfig/cron/v3"
)

// scheduleMacros are the schedules Kubernetes' CronJobs take by name,
// with the five fields each stands for; admission stores the fields.
var scheduleMacros = map[string]string{
	"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *", "@weekly": "0 0 * * 0",
	"@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *",
}

// ValidSchedule checks a five-field cron schedule (minute, hour, day of
// month, month, day of week), read in UTC.
func ValidSchedule(s string) error {
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return fmt.Errorf("%q: schedules are in UTC and take no time zone", s)
	}
	if strings.HasPrefix(s, "@") {
		return fmt.Errorf("%q: expected five cron fields (minute hour day-of-month month day-of-week), or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight and @hourly", s)
	}
	p := cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)
	if _, err := p.Parse(s); err != nil {
		return fmt.Errorf("%q: %v", s, err)
	}
	return nil
}

func admitNetworkPolicy(s *NetworkPolicySpec, errs *ErrorList) {
	validLabels(s.Services, "spec.services", errs)
	if !withinCount(len(s.Ingress), MaxPolicyTerms, "spec.ingress", "rules", errs) {
		return
	}
	if s.Egress != nil && !withinCount(len(*s.Egress), MaxPolicyTerms, "spec.egress", "rules", errs) {
		return
	}
	for i := range s.Ingress {
		r := &s.Ingress[i]
		rp := index("spec.ingress", i)
		if !withinCount(len(r.From), MaxPolicyTerms, rp+".from", "peers", errs) {
			continue
		}
		for j, peer := range r.From {
			pp := index(rp+".from", j)
			if peer.Namespace != "" {
				if err := ValidName(peer.Namespace); err != nil {
					errs.add(pp+".namespace", "%v", err)
				}
			}
			validLabels(peer.Services, pp+".services", errs)
		}
		admitPolicyPorts(r.Ports, rp+".ports", errs)
	}
	if s.Egress != nil {
		for i := range *s.Egress {
			r := &(*s.Egress)[i]
			rp := index("spec.egress", i)
			if !withinCount(len(r.To), MaxPolicyTerms, rp+".to", "peers", errs) {
				continue
			}
			for j := range r.To {
				peer := &r.To[j]
				pp := index(rp+".to", j)
				if peer.CIDR != "" {
					if peer.Namespace != "" || len(peer.Services) > 0 {
						errs.add(pp, "expected either cidr or namespace and services, got both")
					}
					pfx, err := netip.ParsePrefix(peer.CIDR)
					switch {
					case err != nil:
						errs.add(pp+".cidr", "%q: expected an IPv4 network such as 192.0.2.0/24", peer.CIDR)
					case !pfx.Addr().Is4():
						errs.add(pp+".cidr", "%q: only IPv4 networks, as pods reach the outside over IPv4", peer.CIDR)
					default:
						peer.CIDR = pfx.Masked().String()
					}
					continue
				}
				if peer.Namespace != "" {
					if err := ValidName(peer.Namespace); err != nil {
						errs.add(pp+".namespace", "%v", err)
					}
				}
				validLabels(peer.Services, pp+".services", errs)
			}
			admitPolicyPorts(r.Ports, rp+".ports", errs)
		}
	}
}

func admitPolicyPorts(ports []PolicyPort, p string, errs *ErrorList) {
	if !withinCount(len(ports), MaxPolicyTerms, p, "ports", errs) {
		return
	}
	for i := range ports {
		pp := index(p, i)
		oneOf(&ports[i].Protocol, pp+".protocol", TCP, []Protocol{TCP, UDP}, errs)
		if ports[i].Port == 0 {
			errs.add(pp+".port", "missing")
		} else {
			checkCount(ports[i].Port, pp+".port", 1, 65535, errs)
		}
	}
}

func admitRoute(s *RouteSpec, errs *ErrorList) {
	s.Host = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(s.Host), "."))
	if s.Host == "" {
		errs.add("spec.host", "missing")
	} else if err := validHost(s.Host); err != nil {
		errs.add("spec.host", "%v", err)
	}
	if s.Path == "" {
		s.Path = "/"
	}
	if !strings.HasPrefix(s.Path, "/") {
		errs.add("spec.path", "%q: expected a path starting with /", s.Path)
	} else {
		for _, seg := range strings.Split(s.Path, "/") {
			if seg == ".." || seg == "." {
				errs.add("spec.path", "%q: expected a plain path without . or .. segments", s.Path)
				break
			}
		}
		// A prefix of whole segments: /shop and /shop/ mean the same.
		s.Path = path.Clean(s.Path)
	}
	if err := ValidName(s.Service); err != nil {
		errs.add("spec.service", "%v", err)
	}
	if s.Port.Number != 0 {
		checkCount(s.Port.Number, "spec.port", 1, 65535, errs)
	}
	for i, c := range s.TrustedProxies {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			if a, aerr := netip.ParseAddr(c); aerr == nil {
				p, err = netip.PrefixFrom(a, a.BitLen()), nil
			}
		}
		if err != nil {
			errs.add(index("spec.trustedProxies", i), "%q: expected an address or a CIDR of the proxies in front", c)
		} else {
			s.TrustedProxies[i] = p.Masked().String()
		}
	}
	switch s.ProxyProtocol {
	case "", ProxyProtocolV1, ProxyProtocolV2:
	default:
		errs.add("spec.proxyProtocol", "%q: expected %s or %s", s.ProxyProtocol, ProxyProtocolV1, ProxyProtocolV2)
	}
	if t := s.TLS; t != nil {
		if err := ValidName(t.Secret); err != nil {
			errs.add("spec.tls.secret", "%v", err)
		}
		if a := t.ACME; a != nil {
			if strings.HasPrefix(s.Host, "*.") {
				errs.add("spec.tls.acme", "a wildcard host needs a DNS challenge, which is not supported: give the certificate in the Secret")
			}
			if withinLength(a.Email, MaxText, "spec.tls.acme.email", errs) && !strings.Contains(a.Email, "@") {
				errs.add("spec.tls.acme.email", "%q: expected an e-mail address", a.Email)
			}
			if a.Directory == "" {
				a.Directory = LetsEncryptDirectory
			}
			u, err := url.Parse(a.Directory)
			switch {
			case len(a.Directory) > MaxText:
				errs.add("spec.tls.acme.directory", "%d characters, at most %d allowed", len(a.Directory), MaxText)
			case err != nil || u.Host == "":
				errs.add("spec.tls.acme.directory", "%q: expected an https URL", a.Directory)
			case u.Scheme == "https":
			case u.Scheme == "http" && IsLoopbackHost(u.Hostname()):
			default:
				errs.add("spec.tls.acme.directory", "%q: the directory must be https (plain http only on loopback, for tests)", a.Directory)
			}
		}
	}
}

// IsLoopbackHost reports whether a URL's host names this machine's
// loopback: localhost, or a loopback address.
func IsLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.IsLoopback()
}

// validHost checks a route's host: DNS labels, optionally "*." in front.
func validHost(h string) error {
	rest := strings.TrimPrefix(h, "*.")
	if rest == "" || len(h) > 253 {
		return fmt.Errorf("%q: expected a host name such as shop.example.org or *.example.org", h)
	}
	for _, label := range strings.Split(rest, ".") {
		if ValidName(label) != nil {
			return fmt.Errorf("%q: expected a host name such as shop.example.org or *.example.org", h)
		}
	}
	return nil
}

func admitRoleBinding(s *RoleBindingSpec, errs *ErrorList) {
	s.User = strings.TrimSpace(s.User)
	if s.User == "" {
		errs.add("spec.user", "missing: expected the user's name as their certificate gives it")
	}
	withinLength(s.User, MaxUser, "spec.user", errs)
	if s.Role == "" {
		errs.add("spec.role", "missing: expected view, edit or admin")
	} else {
		oneOf(&s.Role, "spec.role", RoleView, []Role{RoleView, RoleEdit, RoleAdmin}, errs)
	}
}

func admitImagePolicy(s *ImagePolicySpec, errs *ErrorList) {
	oneOf(&s.Mode, "spec.mode", PolicyEnforce, []ImagePolicyMode{PolicyEnforce, PolicyWarn}, errs)
	if len(s.Repositories) == 0 {
		errs.add("spec.repositories", "missing: expected repository patterns such as ghcr.io/acme/**")
	}
	if !withinCount(len(s.Repositories), MaxPolicyKeys, "spec.repositories", "patterns", errs) ||
		!withinCount(len(s.Keys), MaxPolicyKeys, "spec.keys", "keys", errs) {
		return
	}
	for i, r := range s.Repositories {
		if err := ValidRepositoryPattern(r); err != nil {
			errs.add(index("spec.repositories", i), "%v", err)
		}
	}
	if len(s.Keys) == 0 {
		errs.add("spec.keys", "missing: expected P-256 public keys in PEM")
	}
	for i, k := range s.Keys {
		if err := validP256Key(k); err != nil {
			errs.add(index("spec.keys", i), "%v", err)
		}
	}
}

// ValidRepositoryPattern checks an image policy pattern:
// registry[:port]/path, * within one segment, ** as whole segments, no tag
// or digest. The registry is always named.
func ValidRepositoryPattern(p string) error {
	if err := lengthError(p, MaxImageName); err != nil {
		return err
	}
	segs := strings.Split(p, "/")
	if len(segs) < 2 {
		return fmt.Errorf("%q: expected registry/path, such as docker.io/library/nginx or ghcr.io/acme/**", p)
	}
	reg := segs[0]
	if reg != "localhost" && !strings.ContainsAny(reg, ".:") {
		return fmt.Errorf("%q: the first segment must name the registry (docker.io, ghcr.io, host:port)", p)
	}
	if strings.Contains(reg, "*") {
		return fmt.Errorf("%q: the registry is matched whole and takes no wildcard", p)
	}
	if strings.Contains(p, "@") {
		return fmt.Errorf("%q: a pattern names a repository, without a digest", p)
	}
	for _, s := range segs[1:] {
		switch {
		case s == "":
			return fmt.Errorf("%q: empty path segment", p)
		case strings.Contains(s, ":"):
			return fmt.Errorf("%q: a pattern names a repository, without a tag", p)
		case strings.Contains(s, "**") && s != "**":
			return fmt.Errorf("%q: ** stands for whole segments only", p)
		case s != strings.ToLower(s):
			return fmt.Errorf("%q: repository paths are lower case", p)
		}
	}
	return nil
}

func validP256Key(s string) error {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return fmt.Errorf("not a PEM public key")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return fmt.Errorf("does not read as a public key: %v", err)
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return fmt.Errorf("expected an ECDSA P-256 public key, as cosign makes")
	}
	return nil
}
