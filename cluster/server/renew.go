package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/legionbsd/legion/cluster/pki"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/status"
)

// DefaultRenewCheck is how often a node looks at its certificate's age.
const DefaultRenewCheck = time.Hour

// keepRenewed renews the node's certificate (and, on a manager, the admin
// credentials beside it) two thirds into its life, checking at start and
// every RenewCheck, until shutdown. Nothing restarts: the node's TLS
// configurations present the new certificate from the next handshake.
func (s *Server) keepRenewed() {
	defer s.wg.Done()
	every := s.cfg.RenewCheck
	if every <= 0 {
		every = DefaultRenewCheck
	}
	t := time.NewTicker(every)
	defer t.Stop()
	// A manager also follows a CA rotation, much sooner than renewals.
	rot := time.NewTicker(rotationCheck)
	defer rot.Stop()
	for {
		if err := s.renewIfDue(s.watchCtx); err != nil && s.watchCtx.Err() == nil {
			s.log.Warn("renewing the node's certificate; trying again later", "err", err, "every", every)
		}
		for again := true; again; {
			select {
			case <-s.watchCtx.Done():
				return
			case <-t.C:
				again = false
			case <-rot.C:
				if err := s.followRotation(s.watchCtx); err != nil && s.watchCtx.Err() == nil {
					s.log.Warn("following the CA rotation; trying again", "err", err, "every", rotationCheck)
				}
			}
		}
	}
}

// renewIfDue renews what is two thirds into its life.
func (s *Server) renewIfDue(ctx context.Context) error {
	creds := s.Credentials()
	if creds == nil {
		return nil
	}
	now := s.cfg.Now()
	if s.role() == roleManager {
		if err := s.renewAdminIfDue(now); err != nil {
			return err
		}
	}
	// A manager renews once it issues under a rotated CA; a worker once a
	// manager presented one (verified through its cross-signed copy).
	leaf := creds.Current().Leaf
	var seen *x509.Certificate
	rotated := false
	if s.role() == roleManager {
		rotated = !pki.IssuedBy(leaf, s.caNow().Cert)
	} else {
		if creds.RotationSeen() == nil {
			s.probeRotation(ctx, creds)
		}
		if seen = creds.RotationSeen(); seen != nil {
			rotated = true
		}
	}
	if now.Before(pki.RenewAt(leaf)) && !rotated {
		return nil
	}
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	csr, err := pki.CSR(key, creds.ID.Name)
	if err != nil {
		return err
	}
	// The leader records every certificate before it is used, so even a
	// manager, which holds the CA, has its own renewal go through it.
	var cert []byte
	if st := s.store(); st != nil && st.IsLeader() {
		if cert, err = s.caNow().Issue(csr, creds.ID, hosts(s.cfg.Advertise), now); err == nil {
			err = recordIssued(ctx, st, cert, false)
		}
	} else {
		cert, err = s.renewThroughManager(ctx, csr)
	}
	if err != nil {
		return err
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	var authority []byte
	if seen != nil {
		// The worker trusts the new CA alone from now on; written first,
		// so a crash leaves it trusting what its next certificate needs.
		authority = pki.AuthorityPEM(seen, nil, nil)
		parsed, err := pki.ParseCert(cert)
		if err != nil {
			return err
		}
		if !pki.IssuedBy(parsed, seen) {
			return fmt.Errorf("the manager renewed the certificate under another CA than %s: trying again", pki.CAName(seen))
		}
		if err := pki.WriteFile(filepath.Join(s.cfg.DataDir, PKIDir, pki.CACertFile), authority); err != nil {
			return err
		}
	}
	if err := pki.SaveRenewed(filepath.Join(s.cfg.DataDir, PKIDir), cert, keyPEM); err != nil {
		return err
	}
	if err := creds.Renew(cert, keyPEM, authority); err != nil {
		return err
	}
	s.log.Info("node certificate renewed", "node", creds.ID.Name, "until", creds.Current().Leaf.NotAfter, "ca", pki.CAName(creds.Authority()))
	return nil
}

// UseManagers tells a worker where the managers are now (its agent
// learns them from heartbeats), for renewing its certificate; without it
// the manager it joined through is asked.
func (s *Server) UseManagers(list func() []string) { s.managers.Store(&list) }

// renewCallTimeout bounds one renewal call to a manager.
const renewCallTimeout = 30 * time.Second

// renewThroughManager asks the leader for a certificate (only it records
// one): a manager asks the leader it follows; a worker the managers it
// knows, going to the leader a follower names.
func (s *Server) renewThroughManager(ctx context.Context, csr []byte) ([]byte, error) {
	var managers []string
	if st := s.store(); st != nil {
		if leader, _ := st.Leader(); leader != "" {
			managers = append(managers, leader)
		}
	}
	if f := s.managers.Load(); f != nil {
		managers = append(managers, (*f)()...)
	}
	managers = append(managers, s.JoinedThrough()...)
	if len(managers) == 0 {
		return nil, fmt.Errorf("no manager known to renew the certificate through")
	}
	tried := map[string]bool{}
	var last error
	for len(managers) > 0 {
		addr := managers[0]
		managers = managers[1:]
		if addr == "" || tried[addr] {
			continue
		}
		tried[addr] = true
		conn, err := s.dial(addr)
		if err != nil {
			last = err
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, renewCallTimeout)
		resp, err := pb.NewDispatcherClient(conn).Renew(cctx, &pb.RenewRequest{Csr: csr})
		cancel()
		conn.Close()
		if err == nil {
			return resp.Certificate, nil
		}
		last = fmt.Errorf("manager %s: %w", addr, err)
		if l := leaderNamed(err); l != "" {
			managers = slices.Insert(managers, 0, l)
		}
	}
	return nil, last
}

// leaderNamed is the leader a follower's refusal names, if any.
func leaderNamed(err error) string {
	for _, d := range status.Convert(err).Details() {
		if nl, ok := d.(*pb.NotLeader); ok {
			return nl.GetLeader()
		}
	}
	return ""
}

// issueRenewal signs a node's renewal on this manager; a manager's keeps
// the addresses its certificate serves TLS for (its Raft address, which
// is the one it advertises).
func (s *Server) issueRenewal(csr []byte, id pki.Identity) ([]byte, error) {
	ca := s.caNow()
	if ca == nil || ca.Key == nil {
		return nil, fmt.Errorf("this daemon holds no CA key")
	}
	var h []string
	if st := s.store(); st != nil && id.Role == pki.RoleManager {
		if f := st.Raft().GetConfiguration(); f.Error() == nil {
			for _, m := range f.Configuration().Servers {
				if string(m.ID) == id.Name {
					h = hosts(string(m.Address))
				}
			}
		}
	}
	return ca.Issue(csr, id, h, s.cfg.Now())
}

func (s *Server) caNow() *pki.CA {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ca
}

// renewAdminIfDue renews <data-dir>/admin.pem, the credentials init wrote
// for the CLI, keeping who it names.
func (s *Server) renewAdminIfDue(now time.Time) error {
	path := filepath.Join(s.cfg.DataDir, AdminFile)
	if _, err := os.Stat(path); err != nil {
		return nil // not written here (a manager that joined)
	}
	admin, err := pki.LoadBundle(path)
	if err != nil {
		return err
	}
	// Renewed under a rotated CA too, with what the manager trusts now.
	ca := s.caNow()
	authority, err := os.ReadFile(filepath.Join(s.pkiDir(), pki.CACertFile))
	if err != nil {
		return err
	}
	held, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if now.Before(pki.RenewAt(admin.Cert.Leaf)) && pki.IssuedBy(admin.Cert.Leaf, ca.Cert) && bytes.HasSuffix(held, authority) { // NewCredentials sets Leaf
		return nil
	}
	key, err := pki.NewKey()
	if err != nil {
		return err
	}
	csr, err := pki.CSR(key, admin.ID.Name)
	if err != nil {
		return err
	}
	cert, err := ca.Issue(csr, admin.ID, nil, now)
	if err != nil {
		return err
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		return err
	}
	if err := pki.WriteFile(path, pki.Bundle(cert, keyPEM, authority)); err != nil {
		return err
	}
	s.log.Info("admin credentials renewed", "file", path)
	return nil
}

// probeDialTimeout bounds the handshake a worker makes to look at a
// manager's certificate chain.
const probeDialTimeout = 10 * time.Second

// probeRotation has a worker shake hands with a manager it knows, which
// lets its credentials see the CA the manager's certificate comes from
// (pki.Credentials.RotationSeen): the agent's connections stay open for
// long, so their handshakes are old.
func (s *Server) probeRotation(ctx context.Context, creds *pki.Credentials) {
	var managers []string
	if f := s.managers.Load(); f != nil {
		managers = append(managers, (*f)()...)
	}
	managers = append(managers, s.JoinedThrough()...)
	d := tls.Dialer{Config: creds.ClientConfig()}
	for _, addr := range managers {
		dctx, cancel := context.WithTimeout(ctx, probeDialTimeout)
		conn, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			conn.Close()
			return
		}
	}
}
