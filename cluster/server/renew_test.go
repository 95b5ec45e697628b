package server

import (
	"context"
	"crypto/x509"
	"math/big"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

func serialOf(c *pki.Credentials) *big.Int { return c.Current().Leaf.SerialNumber }

func adminLeaf(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	b, err := pki.LoadBundle(filepath.Join(dir, AdminFile))
	if err != nil {
		t.Fatal(err)
	}
	return b.Cert.Leaf
}

// Certificates are renewed two thirds into their life without a restart:
// the manager's own and the admin credentials by the manager, a worker's
// through a manager's dispatcher; once the first ones have expired the
// cluster still works on the renewed ones, and a restarted worker loads
// its renewed pair.
func TestCertificatesRenewBeforeTheyExpire(t *testing.T) {
	t.Parallel()
	m, w, _ := joinedPair(t, "worker", shortCerts)
	ctx := context.Background()
	// The manager it joined through is gone by now; the worker renews
	// through the managers its agent knows.
	if err := pki.WriteFile(filepath.Join(w.dir, joinedFile), []byte("127.0.0.1:1\n")); err != nil {
		t.Fatal(err)
	}
	w.s.UseManagers(func() []string { return []string{m.addr} })
	mFirst, wFirst := m.s.Credentials().Current().Leaf, w.s.Credentials().Current().Leaf
	aFirst := adminLeaf(t, m.dir)
	if got := mFirst.NotAfter.Sub(mFirst.NotBefore); got > shortCertLife+time.Second {
		t.Fatalf("certificates last %s, want the configured %s (and a little back-dating)", got, shortCertLife)
	}
	waitFor(t, "every certificate renewed", 15*time.Second, func() bool {
		return serialOf(m.s.Credentials()).Cmp(mFirst.SerialNumber) != 0 &&
			serialOf(w.s.Credentials()).Cmp(wFirst.SerialNumber) != 0 &&
			adminLeaf(t, m.dir).SerialNumber.Cmp(aFirst.SerialNumber) != 0
	})
	// Each against its own first certificate: on a loaded machine the
	// manager may have renewed once already before the worker joined.
	for _, c := range []struct {
		creds *pki.Credentials
		first *x509.Certificate
	}{{m.s.Credentials(), mFirst}, {w.s.Credentials(), wFirst}} {
		if c.creds.Current().Leaf.NotBefore.Before(pki.RenewAt(c.first).Add(-time.Second)) {
			t.Errorf("%s renewed at %s, before two thirds of the first one's life (%s to %s)", c.creds.ID.Name,
				c.creds.Current().Leaf.NotBefore, c.first.NotBefore, c.first.NotAfter)
		}
	}
	for _, c := range []*pki.Credentials{m.s.Credentials(), w.s.Credentials()} {
		if c.ID != IdentityOfFile(t, c) {
			t.Errorf("renewal changed who %s is", c.ID.Name)
		}
	}
	// Past the first certificates' end, every handshake uses renewed ones.
	waitFor(t, "the first certificates expired", 10*time.Second, func() bool {
		return time.Now().After(mFirst.NotAfter) && time.Now().After(wFirst.NotAfter) && time.Now().After(aFirst.NotAfter)
	})
	fresh, err := client.New(client.Options{Server: m.addr, CredentialsFile: filepath.Join(m.dir, AdminFile), Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, _, err := fresh.List(ctx, legion.KindConfig, client.ListOptions{}); err != nil {
		t.Fatalf("the API with renewed admin credentials: %v", err)
	}
	conn, err := grpc.NewClient(m.addr, grpc.WithTransportCredentials(credentials.NewTLS(w.s.Credentials().ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := pb.NewDispatcherClient(conn).Register(ctx, &pb.RegisterRequest{}); err != nil {
		t.Fatalf("the worker's dispatcher call on its renewed certificate: %v", err)
	}
	if _, err := pb.NewDispatcherClient(conn).Renew(ctx, &pb.RenewRequest{Csr: []byte("junk")}); status.Code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "certificate request") {
		t.Fatalf("a renewal without a certificate request: %v", err)
	}
	// A restarted worker presents what it renewed last.
	renewed := serialOf(w.s.Credentials())
	w.stop()
	w.restart()
	files, err := pki.LoadNodeFiles(filepath.Join(w.dir, PKIDir))
	if err != nil {
		t.Fatal(err)
	}
	onDisk, _ := files.Credentials()
	if got := serialOf(w.s.Credentials()); got.Cmp(onDisk.Cert.Leaf.SerialNumber) != 0 || got.Cmp(wFirst.SerialNumber) == 0 {
		t.Fatalf("restarted worker presents %s, on disk %s (last renewed %s, first %s)", got, onDisk.Cert.Leaf.SerialNumber, renewed, wFirst.SerialNumber)
	}
}

// IdentityOfFile is who the node's certificate on disk names.
func IdentityOfFile(t *testing.T, c *pki.Credentials) pki.Identity {
	t.Helper()
	return pki.IdentityOf(c.Current().Leaf)
}
