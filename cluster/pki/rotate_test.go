package pki

import (
	"crypto/x509"
	"testing"
	"time"
)

// A rotated CA's certificates verify, through the cross-signed copy, for
// a node that still trusts only the old CA, which then sees the rotation;
// while rotating both CAs are trusted, and after it the old one is not.
func TestRotateCrossSignsAndHandsOverTrust(t *testing.T) {
	t.Parallel()
	now := time.Now()
	old, err := NewCA(now)
	if err != nil {
		t.Fatal(err)
	}
	next, cross, err := old.Rotate(now)
	if err != nil {
		t.Fatal(err)
	}
	if !IssuedBy(cross, old.Cert) || cross.CheckSignatureFrom(next.Cert) == nil {
		t.Fatal("the cross-signed copy is not signed by the old CA alone")
	}
	worker := Identity{Name: "w1", Role: RoleWorker}
	wcreds, mcreds := midRotation(t, old, next, cross, worker, now)
	oldChain, chain := presented(t, wcreds), mcreds.Current().Certificate
	// The worker renews under the new CA and trusts it alone.
	rc, rk := issuePair(t, next, worker, now)
	if err := wcreds.Renew(rc, rk, AuthorityPEM(next.Cert, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if wcreds.RotationSeen() != nil || !wcreds.Authority().Equal(next.Cert) {
		t.Error("after renewing under the new CA the worker still sees a rotation")
	}
	// Once over, the old CA is no longer trusted.
	if err := mcreds.SetAuthority(AuthorityPEM(next.Cert, nil, nil)); err != nil {
		t.Fatal(err)
	}
	oc, _ := issuePair(t, old, Identity{Name: "u", Role: RoleUser}, now)
	leaf, err := ParseCert(oc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(verifyClient(mcreds)); err == nil {
		t.Error("after the rotation a certificate of the old CA is trusted")
	}
	if _, err := wcreds.Current().Leaf.Verify(verifyClient(mcreds)); err != nil {
		t.Errorf("after the rotation the renewed worker is refused: %v", err)
	}
	// What a connection's peer presented, checked again once it is over:
	// the old certificate no longer chains to a trusted CA; the renewed
	// one does, and so does a new CA's certificate presented with the
	// rotation's chain (cross-signed copy and all).
	if mcreds.Trusts(oldChain) {
		t.Error("after the rotation Trusts takes the old CA's certificate a connection presented")
	}
	if !mcreds.Trusts(presented(t, wcreds)) {
		t.Error("after the rotation Trusts refuses the renewed worker")
	}
	if !mcreds.Trusts(parseAll(t, chain)) {
		t.Error("after the rotation Trusts refuses a new CA's certificate presented with the cross-signed copy")
	}
	if mcreds.Trusts(nil) {
		t.Error("Trusts takes a peer that presented nothing")
	}
}

// presented is what credentials present in a handshake, as the peer
// parses it.
func presented(t *testing.T, c *Credentials) []*x509.Certificate {
	t.Helper()
	return parseAll(t, c.Current().Certificate)
}

func parseAll(t *testing.T, raw [][]byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for _, r := range raw {
		x, err := x509.ParseCertificate(r)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, x)
	}
	return out
}

// verifyClient is how a manager's port checks a client certificate.
func verifyClient(c *Credentials) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: c.ServerConfig().ClientCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

// midRotation checks a rotation from old to next (cross the new CA signed
// by the old) while under way: a worker issued by the old CA verifies a
// manager renewed under the new one, presenting the rotation's chain, and
// sees the rotation; the manager trusts the worker's old certificate, as
// verified and as presented. It returns both credentials.
func midRotation(t *testing.T, old, next *CA, cross *x509.Certificate, worker Identity, now time.Time) (wcreds, mcreds *Credentials) {
	t.Helper()
	wc, wk := issuePair(t, old, worker, now)
	wcreds, err := NewCredentials(wc, wk, old.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	mc, mk := issuePair(t, next, Identity{Name: "m1", Role: RoleManager}, now)
	mcreds, err = NewCredentials(mc, mk, AuthorityPEM(next.Cert, cross, old.Cert))
	if err != nil {
		t.Fatal(err)
	}
	chain := mcreds.Current().Certificate
	if len(chain) != 3 {
		t.Fatalf("the manager presents %d certificates, want its own, the cross-signed CA and the new CA", len(chain))
	}
	if err := wcreds.ClientConfig().VerifyPeerCertificate(chain, nil); err != nil {
		t.Fatalf("a worker trusting the old CA refuses the renewed manager: %v", err)
	}
	if seen := wcreds.RotationSeen(); seen == nil || !seen.Equal(next.Cert) {
		t.Fatalf("the worker saw the rotation to %v, want the new CA", seen)
	}
	if _, err := wcreds.Current().Leaf.Verify(verifyClient(mcreds)); err != nil {
		t.Errorf("while rotating, the old CA's certificate is refused: %v", err)
	}
	if !mcreds.Trusts(presented(t, wcreds)) {
		t.Error("while rotating, Trusts refuses the old CA's certificate as presented")
	}
	return wcreds, mcreds
}
