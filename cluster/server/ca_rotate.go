package server

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// caRotationSecret names the Secret of the reserved namespace that holds
// the cluster's CA once rotated, with its key, so every manager issues
// under it.
const caRotationSecret = "ca-rotation"

// rotationCheck is how often a manager looks whether the CA rotated, and
// the leader whether every node renewed under the new one.
const rotationCheck = time.Second

// rotationMinimum is the least a rotation lasts, however soon every node
// renewed: its end closes the connections opened with a certificate of
// the old CA, which may be the one legion ca rotate came on, and that
// caller is owed its answer first.
const rotationMinimum = 2 * time.Second

// caRotation is the Secret's data (JSON).
type caRotation struct {
	Cert  []byte `json:"cert"`  // the CA, PEM
	Key   []byte `json:"key"`   // its key, PEM
	Cross []byte `json:"cross"` // the CA signed by the one it replaced, PEM
	// Previous is the CA it replaced, trusted beside it until every node
	// holds a certificate under the new one; empty from then on.
	Previous []byte    `json:"previous,omitempty"`
	Started  time.Time `json:"started"`
}

func (r *caRotation) rotating() bool { return len(r.Previous) > 0 }

// parts parses the rotation's certificates and key.
func (r *caRotation) parts() (next *pki.CA, cross, previous *x509.Certificate, err error) {
	if next, err = pki.ParseCA(r.Cert, r.Key); err != nil {
		return nil, nil, nil, err
	}
	if cross, err = parseOptional(r.Cross); err != nil {
		return nil, nil, nil, fmt.Errorf("cross-signed CA: %w", err)
	}
	if previous, err = parseOptional(r.Previous); err != nil {
		return nil, nil, nil, fmt.Errorf("previous CA: %w", err)
	}
	return next, cross, previous, nil
}

// authorityPEM is what nodes trust and present: while rotating, the new
// CA, its cross-signed copy and the old one; then the new one alone.
func (r *caRotation) authorityPEM() ([]byte, error) {
	next, cross, previous, err := r.parts()
	if err != nil {
		return nil, err
	}
	if !r.rotating() {
		return pki.AuthorityPEM(next.Cert, nil, nil), nil
	}
	return pki.AuthorityPEM(next.Cert, cross, previous), nil
}

func readRotation(st *store.Store) (*caRotation, uint64, error) {
	o, _, err := st.Get(legion.KindSecret, legion.SystemNamespace, caRotationSecret)
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	sec, ok := o.(*legion.Secret)
	if !ok {
		return nil, 0, fmt.Errorf("secret %s/%s: not a Secret", legion.SystemNamespace, caRotationSecret)
	}
	var r caRotation
	if err := json.Unmarshal(sec.Spec.Data, &r); err != nil {
		return nil, 0, fmt.Errorf("secret %s/%s: %w", legion.SystemNamespace, caRotationSecret, err)
	}
	return &r, sec.Metadata.Version, nil
}

func writeRotation(ctx context.Context, st *store.Store, r *caRotation, version uint64) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	o, _ := legion.New(legion.KindSecret)
	sec := o.(*legion.Secret)
	sec.Metadata.Name, sec.Metadata.Namespace = caRotationSecret, legion.SystemNamespace
	sec.Spec.Data = data
	pre := store.Precondition{Version: version}
	if version == 0 {
		pre = store.Precondition{MustNotExist: true}
	}
	_, _, err = st.Put(ctx, sec, store.WriteOptions{Precondition: pre})
	return err
}

// RotateCA starts a rotation to a new root CA on the leader, or, with
// status_only or while one is under way, reports it. Nodes renew under
// the new CA on their own; once every node has, the old CA is refused.
func (c *clusterService) RotateCA(ctx context.Context, req *pb.RotateCARequest) (*pb.RotateCAResponse, error) {
	s := c.s
	if userOf(ctx) != nil {
		return nil, status.Error(codes.PermissionDenied, "only the cluster admin rotates the CA")
	}
	// A CA given (legion ca rotate --ca-cert --ca-key) is checked where
	// the request arrives, before it goes on to the leader.
	given, err := importedCA(req.GetCaCert(), req.GetCaKey(), s.cfg.Now())
	if err != nil {
		return nil, err
	}
	if given != nil && req.StatusOnly {
		return nil, status.Error(codes.InvalidArgument, "status_only: a CA to rotate to is not taken with it")
	}
	st, conn, fctx, err := s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewClusterClient(conn).RotateCA(fctx, req)
	}
	if err := st.Barrier(ctx); err != nil {
		return nil, toStatus(err)
	}
	rot, version, err := readRotation(st)
	if err != nil {
		return nil, toStatus(err)
	}
	if req.StatusOnly || (rot != nil && rot.rotating()) {
		resp, err := s.rotationStatus(st, rot)
		if err != nil || req.StatusOnly {
			return resp, err
		}
		return nil, status.Errorf(codes.FailedPrecondition, "a CA rotation is under way: %d nodes have not renewed under the new CA yet (%s); see legion ca status",
			len(resp.Pending), strings.Join(resp.Pending, ", "))
	}
	old := s.caNow()
	var next *pki.CA
	var cross *x509.Certificate
	if given != nil {
		next = given
		if cross, err = old.RotateTo(next); err != nil {
			if ie := (*pki.ImportError)(nil); errors.As(err, &ie) {
				return nil, status.Error(codes.InvalidArgument, err.Error())
			}
			return nil, toStatus(err)
		}
	} else if next, cross, err = old.Rotate(s.cfg.Now()); err != nil {
		return nil, toStatus(err)
	}
	key, err := next.KeyPEM()
	if err != nil {
		return nil, toStatus(err)
	}
	r := &caRotation{Cert: next.CertPEM(), Key: key, Cross: pki.AuthorityPEM(cross, nil, nil), Previous: old.CertPEM(), Started: s.cfg.Now()}
	if err := writeRotation(ctx, st, r, version); err != nil {
		return nil, toStatus(err)
	}
	s.log.Info("CA rotation started: nodes renew under the new CA", "ca", pki.CAName(next.Cert), "previous", pki.CAName(old.Cert), "imported", given != nil)
	if err := s.followRotation(ctx); err != nil {
		s.log.Warn("taking up the rotated CA (tried again)", "err", err)
	}
	resp, err := s.rotationStatus(st, r)
	if err != nil {
		return nil, err
	}
	resp.Started = true
	return resp, nil
}

// rotationStatus reports a rotation: the CA issued under now, the one
// still trusted, and the nodes not yet renewed under the new one.
func (s *Server) rotationStatus(st *store.Store, rot *caRotation) (*pb.RotateCAResponse, error) {
	if rot == nil {
		return &pb.RotateCAResponse{Digest: pki.Digest(s.caNow().Cert)}, nil
	}
	next, _, previous, err := rot.parts()
	if err != nil {
		return nil, toStatus(err)
	}
	resp := &pb.RotateCAResponse{Digest: pki.Digest(next.Cert)}
	if previous != nil {
		resp.PreviousDigest = pki.Digest(previous)
	}
	if rot.rotating() {
		if resp.Pending, err = pendingNodes(st, next); err != nil {
			return nil, toStatus(err)
		}
	}
	return resp, nil
}

// pendingNodes lists the nodes whose newest recorded certificate is not
// under ca.
func pendingNodes(st *store.Store, ca *pki.CA) ([]string, error) {
	cfgs, _, err := st.List(legion.KindConfig, legion.SystemNamespace, func(o legion.Object) bool {
		return strings.HasPrefix(o.GetMetadata().Name, pki.NodeCertsPrefix)
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, o := range cfgs {
		r, err := pki.ParseNodeCerts(o.(*legion.Config).Spec.Data)
		if err != nil {
			return nil, err
		}
		if !r.Under(ca.Cert) {
			out = append(out, r.Node)
		}
	}
	slices.Sort(out)
	return out, nil
}

// followRotation brings this manager to the cluster's CA rotation: it
// issues under the new CA, trusts what the rotation says (ca.crt and
// ca.key rewritten), renews its own certificate and the admin's under
// it, and, on the leader, ends the rotation once every node renewed.
func (s *Server) followRotation(ctx context.Context) error {
	st := s.store()
	if st == nil || s.role() != roleManager {
		return nil
	}
	rot, version, err := readRotation(st)
	if err != nil || rot == nil {
		return err
	}
	next, _, _, err := rot.parts()
	if err != nil {
		return err
	}
	authority, err := rot.authorityPEM()
	if err != nil {
		return err
	}
	if err := s.takeAuthority(next, authority); err != nil {
		return err
	}
	if err := s.renewIfDue(ctx); err != nil {
		return err
	}
	if !st.IsLeader() || !rot.rotating() || s.cfg.Now().Sub(rot.Started) < rotationMinimum {
		return nil
	}
	pending, err := pendingNodes(st, next)
	if err != nil || len(pending) > 0 {
		return err
	}
	rot.Previous = nil
	if err := writeRotation(ctx, st, rot, version); err != nil {
		return err
	}
	if authority, err = rot.authorityPEM(); err != nil {
		return err
	}
	if err := s.takeAuthority(next, authority); err != nil {
		return err
	}
	s.log.Info("CA rotation done: every node renewed under the new CA; the previous CA is refused from now on", "ca", pki.CAName(next.Cert))
	return nil
}

// takeAuthority makes next the CA this manager issues under and
// authority what it trusts and presents, on disk (pki/ca.crt, ca.key;
// the autolock check seals the key again if it is on) and in memory.
func (s *Server) takeAuthority(next *pki.CA, authority []byte) error {
	dir := s.pkiDir()
	held, _ := os.ReadFile(filepath.Join(dir, pki.CACertFile))
	if bytes.Equal(held, authority) && s.caNow().Cert.Equal(next.Cert) {
		return nil
	}
	key, err := next.KeyPEM()
	if err != nil {
		return err
	}
	s.al.mu.Lock()
	if !s.caNow().Cert.Equal(next.Cert) {
		err = (&pki.NodeFiles{CAKey: key}).Save(dir)
	}
	if err == nil {
		err = pki.WriteFile(filepath.Join(dir, pki.CACertFile), authority)
	}
	s.al.mu.Unlock()
	if err != nil {
		return fmt.Errorf("writing the rotated CA: %w", err)
	}
	if err := s.Credentials().SetAuthority(authority); err != nil {
		return err
	}
	// What was trusted before may no longer be: connections opened with
	// a certificate of a CA left behind go, and their holders' next
	// handshake is checked against what is trusted now.
	if n := s.peers.cut(s.trusts); n > 0 {
		s.log.Info("closed the connections opened with a certificate of a CA no longer trusted", "connections", n)
	}
	next.Lifetime = s.cfg.CertLifetime
	s.mu.Lock()
	s.ca = next
	s.mu.Unlock()
	s.log.Info("trusting the cluster's CA as rotated", "ca", pki.CAName(next.Cert))
	return nil
}

// parseOptional parses a certificate's PEM; nil when there is none.
func parseOptional(data []byte) (*x509.Certificate, error) {
	if len(data) == 0 {
		return nil, nil
	}
	return pki.ParseCert(data)
}
