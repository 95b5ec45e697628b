package pki

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"
)

// Every certificate the CA signs may serve TLS: a client, an agent or a
// joining node must take only a manager's as a server, or the holder of
// a worker's or user's certificate could pose as a manager and be sent
// Secrets and join tokens.
func TestOnlyAManagersCertificateServes(t *testing.T) {
	now := time.Now()
	ca, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	creds := func(id Identity) *Credentials {
		c, k := issuePair(t, ca, id, now)
		cr, err := NewCredentials(c, k, ca.CertPEM())
		if err != nil {
			t.Fatal(err)
		}
		return cr
	}
	admin := creds(Identity{Name: "admin", Role: RoleAdmin})
	digest := Digest(ca.Cert)
	for _, server := range []Identity{
		{Name: "m1", Role: RoleManager},
		{Name: "w1", Role: RoleWorker},
		{Name: "mallory", Role: RoleUser},
		{Name: "admin", Role: RoleAdmin},
	} {
		s := creds(server)
		for name, cfg := range map[string]*tls.Config{"client": admin.ClientConfig(), "join": JoinConfig(digest, nil)} {
			_, err := handshake(t, s.ServerConfig(), cfg)
			switch {
			case server.Role == RoleManager && err != nil:
				t.Errorf("%s of a manager's server: %v", name, err)
			case server.Role != RoleManager && !errors.Is(err, ErrNotManager):
				t.Errorf("%s of a server with %s %q's certificate: %v, want it refused as not a manager", name, server.Role, server.Name, err)
			}
		}
	}
}
