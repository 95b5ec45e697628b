package main

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/pki/pkitest"
	"github.com/legionbsd/legion/cluster/server"
)

// legion init --ca-cert --ca-key: each refusal names the flag and what it
// expected, before the daemon is asked, which stays fresh; then init with
// a CA of the operator's own (an intermediate) makes it the cluster's
// root, and legion ca rotate --ca-cert --ca-key rotates to another.
func TestInitAndRotateWithImportedCA(t *testing.T) {
	t.Parallel()
	s, dir := startDaemon(t)
	root := pkitest.NewCA(t, pkitest.Options{Name: "example root"})
	ca := pkitest.NewCA(t, pkitest.Options{Name: "legion at example", Parent: root})
	certFile, keyFile := ca.Files(t)
	_, otherKey := pkitest.NewCA(t, pkitest.Options{}).Files(t)
	leafFile, _ := pkitest.NewCA(t, pkitest.Options{Key: ca.Key, Edit: func(c *x509.Certificate) { c.IsCA = false }}).Files(t)
	expiredFile, _ := pkitest.NewCA(t, pkitest.Options{Key: ca.Key, Edit: func(c *x509.Certificate) {
		c.NotBefore, c.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	}}).Files(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ca-cert", certFile}, "--ca-cert needs --ca-key: expected both"},
		{[]string{"--ca-key", keyFile}, "--ca-key needs --ca-cert: expected both"},
		{[]string{"--ca-cert", leafFile, "--ca-key", keyFile}, "--ca-cert " + leafFile + ": not a CA certificate: expected basicConstraints CA:TRUE"},
		{[]string{"--ca-cert", expiredFile, "--ca-key", keyFile}, "--ca-cert " + expiredFile + ": expired on "},
		{[]string{"--ca-cert", certFile, "--ca-key", otherKey}, "--ca-key " + otherKey + ": the key does not match the certificate"},
		{[]string{"--ca-cert", certFile, "--ca-key", filepath.Join(t.TempDir(), "none")}, "--ca-key: open "},
	} {
		out, err := runLegion(t, "", append([]string{"init", "--server", s.Addr()}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "init: ") {
			t.Errorf("init %v: %v\n%s\nwant an error with %q", c.args, err, out, c.want)
		}
	}
	out, err := runLegion(t, "", "init", "--server", s.Addr(), "--ca-cert", certFile, "--ca-key", keyFile)
	if err != nil {
		t.Fatalf("init with the imported CA: %v\n%s", err, out)
	}
	admin := filepath.Join(dir, server.AdminFile)
	creds, err := pki.LoadBundle(admin)
	if err != nil {
		t.Fatal(err)
	}
	if !creds.CA.Equal(ca.Cert) || !pki.IssuedBy(creds.Cert.Leaf, ca.Cert) {
		t.Errorf("admin.pem is of CA %q, want the imported one", creds.CA.Subject)
	}
	flags := []string{"--server", s.Addr(), "--credentials", admin}
	if out, err := runLegion(t, "", append([]string{"ca", "rotate", "--ca-key", keyFile}, flags...)...); err == nil || !strings.Contains(err.Error(), "ca rotate: --ca-key needs --ca-cert") {
		t.Errorf("ca rotate with --ca-key alone: %v\n%s", err, out)
	}
	if out, err := runLegion(t, "", append([]string{"ca", "rotate", "--ca-cert", certFile, "--ca-key", keyFile}, flags...)...); err == nil || !strings.Contains(err.Error(), "a rotation needs a new key") {
		t.Errorf("ca rotate to the cluster's own CA: %v\n%s", err, out)
	}
	next := pkitest.NewCA(t, pkitest.Options{Name: "legion at example, 2", Parent: root})
	nextCert, nextKey := next.Files(t)
	out, err = runLegion(t, "", append([]string{"ca", "rotate", "--ca-cert", nextCert, "--ca-key", nextKey}, flags...)...)
	if err != nil {
		t.Fatalf("ca rotate to an imported CA: %v\n%s", err, out)
	}
	if !strings.Contains(out, "CA rotation started") || !strings.Contains(out, "CA:          "+pki.Digest(next.Cert)) {
		t.Errorf("ca rotate printed\n%s\nwant the rotation started to %s", out, pki.Digest(next.Cert))
	}
	held, err := os.ReadFile(filepath.Join(dir, server.PKIDir, pki.CACertFile))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := pki.ParseCert(held); err != nil || !c.Equal(next.Cert) {
		t.Errorf("the manager's ca.crt does not start with the CA rotated to (%v)", err)
	}
}

// After init with a CA given, the CLI checks the cluster's root is that
// CA: a daemon of an older build ignores the fields and makes its own.
func TestInitChecksTheGivenCAWasTaken(t *testing.T) {
	t.Parallel()
	theirs := dispatchertest.NewCA(t)
	_, bundle := dispatchertest.Issue(t, theirs, "admin", pki.RoleAdmin)
	admin := filepath.Join(t.TempDir(), "admin.pem")
	if err := os.WriteFile(admin, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	mine := pkitest.NewCA(t, pkitest.Options{})
	f := caFiles{cert: "mine.crt", key: "mine.key"}
	var warn strings.Builder
	if err := f.checkTaken(&warn, mine.CertPEM(), admin); err == nil || !strings.Contains(err.Error(), "the daemon made a CA of its own") {
		t.Fatalf("init answered under another CA: %v, want it said", err)
	}
	if err := f.checkTaken(&warn, theirs.CertPEM(), admin); err != nil {
		t.Fatalf("init under the CA given: %v", err)
	}
	if err := f.checkTaken(&warn, mine.CertPEM(), filepath.Join(t.TempDir(), "none.pem")); err != nil || !strings.Contains(warn.String(), "could not be checked") {
		t.Fatalf("admin credentials unreadable: %v, warned %q", err, warn.String())
	}
}
