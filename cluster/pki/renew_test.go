package pki

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func issuePair(t *testing.T, ca *CA, id Identity, now time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	csr, err := CSR(key, id.Name)
	if err != nil {
		t.Fatal(err)
	}
	if certPEM, err = ca.Issue(csr, id, nil, now); err != nil {
		t.Fatal(err)
	}
	if keyPEM, err = KeyPEM(key); err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM
}

// Renewed credentials are presented from the next handshake on, by every
// configuration made before; another holder's certificate is refused.
func TestCredentialsRenew(t *testing.T) {
	now := time.Now()
	ca, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{Name: "n1", Role: RoleWorker}
	c1, k1 := issuePair(t, ca, id, now)
	creds, err := NewCredentials(c1, k1, ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	client, server := creds.ClientConfig(), creds.ServerConfig()
	serial := func(get func() (*tls.Certificate, error)) string {
		c, err := get()
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.SerialNumber.String()
	}
	first := serial(func() (*tls.Certificate, error) { return client.GetClientCertificate(nil) })
	c2, k2 := issuePair(t, ca, id, now)
	if err := creds.Renew(c2, k2); err != nil {
		t.Fatal(err)
	}
	second := serial(func() (*tls.Certificate, error) { return client.GetClientCertificate(nil) })
	if first == second || serial(func() (*tls.Certificate, error) { return server.GetCertificate(nil) }) != second {
		t.Fatalf("after Renew the configurations present %s / server %s, want the new %s", first, serial(func() (*tls.Certificate, error) { return server.GetCertificate(nil) }), second)
	}
	c3, k3 := issuePair(t, ca, Identity{Name: "n2", Role: RoleWorker}, now)
	if err := creds.Renew(c3, k3); err == nil {
		t.Fatal("a certificate of another node must be refused")
	}
	other, _ := NewCA(now)
	c4, k4 := issuePair(t, other, id, now)
	if err := creds.Renew(c4, k4); err == nil {
		t.Fatal("a certificate of another CA must be refused")
	}
	leaf, _ := x509.ParseCertificate(creds.Current().Certificate[0])
	if got, want := RenewAt(leaf), leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore)*2/3); !got.Equal(want) {
		t.Fatalf("RenewAt %s, want two thirds into its life %s", got, want)
	}
}

// A renewal a crash cut short leaves one whole pair: finished when the
// new pair is whole, dropped when it is not.
func TestSaveRenewedSurvivesACrash(t *testing.T) {
	now := time.Now()
	ca, _ := NewCA(now)
	id := Identity{Name: "n1", Role: RoleWorker}
	oldC, oldK := issuePair(t, ca, id, now)
	newC, newK := issuePair(t, ca, id, now.Add(time.Hour))
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		if err := (&NodeFiles{CACert: ca.CertPEM(), Cert: oldC, Key: oldK}).Save(dir); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	write := func(t *testing.T, p string, data []byte) {
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		crash func(t *testing.T, dir string)
		want  []byte // the certificate in place after loading
	}{
		{"completed", func(t *testing.T, dir string) {
			if err := SaveRenewed(dir, newC, newK); err != nil {
				t.Fatal(err)
			}
		}, newC},
		{"both written, none renamed", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, NodeKeyFile+".new"), newK)
			write(t, filepath.Join(dir, NodeCertFile+".new"), newC)
		}, newC},
		{"key renamed", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, NodeKeyFile), newK)
			write(t, filepath.Join(dir, NodeCertFile+".new"), newC)
		}, newC},
		{"certificate half written", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, NodeKeyFile+".new"), newK)
			write(t, filepath.Join(dir, NodeCertFile+".new"), newC[:len(newC)/2])
		}, oldC},
		{"only the key written", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, NodeKeyFile+".new"), newK)
		}, oldC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := setup(t)
			tc.crash(t, dir)
			f, err := LoadNodeFiles(dir)
			if err != nil {
				t.Fatal(err)
			}
			if string(f.Cert) != string(tc.want) {
				t.Fatalf("certificate in place is not the expected one")
			}
			if _, err := f.Credentials(); err != nil {
				t.Fatalf("the pair in place does not match: %v", err)
			}
			for _, n := range []string{NodeKeyFile + ".new", NodeCertFile + ".new"} {
				if _, err := os.Stat(filepath.Join(dir, n)); err == nil {
					t.Errorf("%s left behind", n)
				}
			}
		})
	}
}
