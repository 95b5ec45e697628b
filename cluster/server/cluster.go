package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/netplan"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/buildinfo"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/netbsd/addrplan"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// clusterService answers init, join, status and join tokens.
type clusterService struct {
	pb.UnimplementedClusterServer
	s *Server
}

// tokenName is the Secret in the reserved namespace holding a role's
// join token secret.
func tokenName(role string) string { return "join-token-" + role }

func checkTokenRole(role string) error {
	if role != roleWorker && role != roleManager {
		return status.Errorf(codes.InvalidArgument, "token role %q: expected worker or manager", role)
	}
	return nil
}

// hosts are the names a node's certificate is valid for.
func hosts(addr string) []string {
	out := []string{"127.0.0.1", "::1", "localhost"}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" {
		out = append(out, h)
	}
	return out
}

func (c *clusterService) Init(ctx context.Context, req *pb.InitRequest) (*pb.InitResponse, error) {
	s := c.s
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	if role := s.role(); role != "" {
		return nil, s.alreadyMember(role, callerOf(ctx).loopback)
	}
	plan, err := s.initRanges(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	now := s.cfg.Now()
	ca, err := initCA(req, now)
	if err != nil {
		return nil, err
	}
	ca.Lifetime = s.cfg.CertLifetime
	issue := func(id pki.Identity, h []string) (cert, key []byte, err error) {
		k, err := pki.NewKey()
		if err != nil {
			return nil, nil, err
		}
		csr, err := pki.CSR(k, id.Name)
		if err != nil {
			return nil, nil, err
		}
		if cert, err = ca.Issue(csr, id, h, now); err != nil {
			return nil, nil, err
		}
		key, err = pki.KeyPEM(k)
		return cert, key, err
	}
	cert, key, err := issue(pki.Identity{Name: s.nodeID, Role: pki.RoleManager}, hosts(s.cfg.Advertise))
	if err != nil {
		return nil, toStatus(err)
	}
	adminCert, adminKey, err := issue(pki.Identity{Name: "admin", Role: pki.RoleAdmin}, nil)
	if err != nil {
		return nil, toStatus(err)
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, toStatus(err)
	}
	files := &pki.NodeFiles{CACert: ca.CertPEM(), CAKey: caKey, Cert: cert, Key: key}
	if err := s.persistMembership(files, roleManager); err != nil {
		return nil, toStatus(err)
	}
	adminPath := filepath.Join(s.cfg.DataDir, AdminFile)
	if err := pki.WriteFile(adminPath, pki.Bundle(adminCert, adminKey, ca.CertPEM())); err != nil {
		return nil, toStatus(fmt.Errorf("writing %s: %w", adminPath, err))
	}
	if err := s.become(roleManager, files, true); err != nil {
		return nil, toStatus(err)
	}
	st := s.store()
	if err := waitLeader(ctx, st, s.cfg.WriteTimeout); err != nil {
		return nil, err
	}
	if err := recordOwn(ctx, st, cert); err != nil {
		return nil, toStatus(fmt.Errorf("recording this manager's certificate: %w", err))
	}
	if err := netplan.Write(ctx, st, plan); err != nil {
		return nil, toStatus(err)
	}
	for _, role := range []string{roleWorker, roleManager} {
		if err := writeToken(ctx, st, role); err != nil {
			return nil, toStatus(err)
		}
	}
	s.log.Info("initialised a new cluster", "node", s.nodeID, "admin", adminPath, "pod_cidr", plan.Pod, "service_cidr", plan.Service)
	return &pb.InitResponse{NodeId: s.nodeID, AdminCredentials: adminPath,
		PodCidr: plan.Pod.String(), ServiceCidr: plan.Service.String()}, nil
}

// initRanges is the address plan a new cluster gets: the ranges asked
// for, the rest chosen by Config.Ranges (or the defaults), checked.
func (s *Server) initRanges(req *pb.InitRequest) (addrplan.Plan, error) {
	var asked addrplan.Plan
	var err error
	if v := req.GetPodCidr(); v != "" {
		if asked.Pod, err = addrplan.ParseRange("pod CIDR", v); err != nil {
			return addrplan.Plan{}, err
		}
	}
	if v := req.GetServiceCidr(); v != "" {
		if asked.Service, err = addrplan.ParseRange("service CIDR", v); err != nil {
			return addrplan.Plan{}, err
		}
	}
	plan := asked
	if s.cfg.Ranges != nil {
		if plan, err = s.cfg.Ranges(asked); err != nil {
			return addrplan.Plan{}, err
		}
	} else {
		if !plan.Pod.IsValid() {
			plan.Pod = addrplan.Default().Pod
		}
		if !plan.Service.IsValid() {
			plan.Service = addrplan.Default().Service
		}
	}
	return plan, plan.Validate()
}

func (s *Server) persistMembership(files *pki.NodeFiles, role string) error {
	if err := files.Save(filepath.Join(s.cfg.DataDir, PKIDir)); err != nil {
		return err
	}
	return pki.WriteFile(filepath.Join(s.cfg.DataDir, roleFile), []byte(role+"\n"))
}

func waitLeader(ctx context.Context, st *store.Store, d time.Duration) error {
	if d == 0 {
		d = store.DefaultWriteTimeout
	}
	deadline := time.Now().Add(d)
	for !st.IsLeader() {
		if time.Now().After(deadline) {
			return status.Error(codes.Unavailable, "the new cluster elected no leader in time")
		}
		select {
		case <-ctx.Done():
			return toStatus(ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func writeToken(ctx context.Context, st *store.Store, role string) error {
	o, _ := legion.New(legion.KindSecret)
	sec := o.(*legion.Secret)
	sec.Metadata.Name, sec.Metadata.Namespace = tokenName(role), legion.SystemNamespace
	sec.Spec.Data = []byte(pki.NewSecret())
	_, _, err := st.Put(ctx, sec, store.WriteOptions{})
	return err
}

func readToken(st *store.Store, role string) (string, error) {
	o, _, err := st.Get(legion.KindSecret, legion.SystemNamespace, tokenName(role))
	if err != nil {
		return "", fmt.Errorf("the %s join token: %w", role, err)
	}
	return string(o.(*legion.Secret).Spec.Data), nil
}

func (c *clusterService) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	s := c.s
	out := &pb.StatusResponse{NodeId: s.nodeID, Role: s.role(), Protocol: Protocol,
		Version: buildinfo.Version, Commit: buildinfo.Commit(), GoVersion: buildinfo.GoVersion(),
		NowUnixNano: time.Now().UnixNano()}
	st := s.store()
	if st == nil {
		out.Initialized = out.Role != ""
		return out, nil
	}
	out.Initialized = true
	r := st.Raft()
	out.State = r.State().String()
	out.LeaderAddress, out.LeaderId = st.Leader()
	out.Term, out.AppliedIndex, out.CommitIndex = r.CurrentTerm(), st.AppliedIndex(), r.CommitIndex()
	f := r.GetConfiguration()
	if err := f.Error(); err == nil {
		for _, m := range f.Configuration().Servers {
			out.Members = append(out.Members, &pb.Member{Id: string(m.ID), Address: string(m.Address),
				Voter: m.Suffrage == raft.Voter, Leader: string(m.ID) == out.LeaderId})
		}
		// A manager asked by another for its status (a probe) does not
		// probe in turn.
		if !forwarded(ctx) {
			s.reach(ctx, out.Members)
		}
		// The membership just read, not the calls' cached one.
		s.members.mu.Lock()
		s.members.take(st, f.Configuration())
		s.members.mu.Unlock()
	}
	// What its Raft says of a removed manager (a candidate, no leader,
	// itself a member) is its own, not the cluster's state.
	out.Removed = s.selfRemoved()
	return out, nil
}

func (c *clusterService) TokenShow(ctx context.Context, req *pb.TokenRequest) (*pb.TokenResponse, error) {
	return c.token(ctx, req, false)
}

func (c *clusterService) TokenRotate(ctx context.Context, req *pb.TokenRequest) (*pb.TokenResponse, error) {
	return c.token(ctx, req, true)
}

func (c *clusterService) token(ctx context.Context, req *pb.TokenRequest, rotate bool) (*pb.TokenResponse, error) {
	if err := checkTokenRole(req.Role); err != nil {
		return nil, err
	}
	st, conn, fctx, err := c.s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		if rotate {
			return pb.NewClusterClient(conn).TokenRotate(fctx, req)
		}
		return pb.NewClusterClient(conn).TokenShow(fctx, req)
	}
	if rotate {
		if err := writeToken(ctx, st, req.Role); err != nil {
			return nil, toStatus(err)
		}
	} else if err := st.Barrier(ctx); err != nil {
		return nil, toStatus(err)
	}
	secret, err := readToken(st, req.Role)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.TokenResponse{Token: pki.Token{Digest: pki.Digest(c.s.ca.Cert), Secret: secret}.String()}, nil
}

// Join admits a node holding a join token: it checks the token against
// this cluster's CA and secrets before anything is written and signs the
// node's certificate request. A manager is not added to Raft here: it
// asks for that itself (Promote) once it serves its new certificate, so
// the leader never reaches it before its TLS is in place.
func (c *clusterService) Join(ctx context.Context, req *pb.JoinRequest) (*pb.JoinResponse, error) {
	s := c.s
	tok, err := pki.ParseToken(req.Token)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if tok.Digest != pki.Digest(s.ca.Cert) {
		return nil, status.Error(codes.PermissionDenied, "join token: it names another cluster's CA")
	}
	if req.Protocol > Protocol {
		return nil, status.Errorf(codes.FailedPrecondition, "the joining node speaks protocol %d, this cluster %d: upgrade the managers first", req.Protocol, Protocol)
	}
	st, conn, fctx, err := s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewClusterClient(conn).Join(fctx, req)
	}
	if err := st.Barrier(ctx); err != nil {
		return nil, toStatus(err)
	}
	tokenRole := ""
	for _, role := range []string{roleManager, roleWorker} {
		held, err := readToken(st, role)
		if err != nil {
			return nil, toStatus(err)
		}
		if pki.SecretMatches(held, tok.Secret) {
			tokenRole = role
		}
	}
	if tokenRole == "" {
		return nil, status.Error(codes.PermissionDenied, "join token: the secret is not valid (mistyped, or the token was rotated)")
	}
	role := req.Role
	if role == "" {
		role = tokenRole
	}
	if err := checkTokenRole(role); err != nil {
		return nil, err
	}
	if role == roleManager && tokenRole != roleManager {
		return nil, status.Error(codes.PermissionDenied, "join token: a worker token cannot join a manager; use the manager token (legion token show manager)")
	}
	if err := checkNodeID(req.NodeId); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "join: %v", err)
	}
	if role == roleManager && req.Address == "" {
		return nil, status.Error(codes.InvalidArgument, "join: address: required for a manager (where the others reach it)")
	}
	key, err := pki.CSRKey(req.Csr)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	// The id names the node from now on, in its certificate and its Node:
	// it must not name anyone already. The node's own join, asked again
	// (its key signed the request, as before) because the answer was lost
	// (a leader lost as it recorded the certificate, whose write applied),
	// is answered again; nothing was handed out under its key but to it.
	again, err := nodeIDFree(st, req.NodeId, pki.Role(role), key)
	if errors.Is(err, errNodeIDTaken) {
		return nil, status.Errorf(codes.AlreadyExists, "join: %v", err)
	} else if err != nil {
		return nil, toStatus(err)
	}
	cert, err := s.ca.Issue(req.Csr, pki.Identity{Name: req.NodeId, Role: pki.Role(role)}, hosts(req.Address), s.cfg.Now())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := recordIssued(ctx, st, cert, !again); errors.Is(err, dispatcher.ErrIssued) {
		// Another join of the same id got there first.
		return nil, status.Errorf(codes.AlreadyExists, "join: node_id %q: already in use by a node whose join finished first", req.NodeId)
	} else if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.JoinResponse{Certificate: cert, CaCertificate: s.ca.CertPEM(), Role: role}
	if role == roleManager {
		if out.CaKey, err = s.ca.KeyPEM(); err != nil {
			return nil, s.unrecord(req.NodeId, toStatus(err))
		}
	}
	s.log.Info("node joined", "node", req.NodeId, "role", role, "address", req.Address, "asked_again", again)
	return out, nil
}

// recordIssued records a certificate the leader issued for the node it
// names, before it is handed out (dispatcher.RecordCert).
func recordIssued(ctx context.Context, st *store.Store, certPEM []byte, first bool) error {
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		return err
	}
	return dispatcher.RecordCert(ctx, st, cert, first)
}

// recordOwn records, at init, the first manager's own certificate. The
// manager serves from become on, and its node's agent may register
// before this runs, recording the same certificate on first use (the
// dispatcher's holds): a record that holds this very certificate is the
// one init would write, where any other means the name is taken.
func recordOwn(ctx context.Context, st *store.Store, certPEM []byte) error {
	err := recordIssued(ctx, st, certPEM, true)
	if !errors.Is(err, dispatcher.ErrIssued) {
		return err
	}
	cert, perr := pki.ParseCert(certPEM)
	if perr != nil {
		return err
	}
	if r, _, rerr := dispatcher.ReadCerts(st, pki.IdentityOf(cert).Name); rerr == nil && r != nil && r.Holds(cert) {
		return nil
	}
	return err
}

// unrecord drops the record of a join that failed after it, so the id is
// free again for the node's next try; the certificate was never handed
// out.
func (s *Server) unrecord(node string, failed error) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout())
	defer cancel()
	if st := s.store(); st != nil {
		if err := dispatcher.ForgetCerts(ctx, st, node); err != nil {
			s.log.Warn("dropping the certificate record of a failed join", "node", node, "err", err)
		}
	}
	return failed
}

func (s *Server) writeTimeout() time.Duration {
	if s.cfg.WriteTimeout == 0 {
		return store.DefaultWriteTimeout
	}
	return s.cfg.WriteTimeout
}

// JoinCluster makes a fresh daemon join the cluster of the manager at
// req.Server: the manager's CA is checked against the token's digest
// during the handshake, before the request (and its token) is sent.
func (c *clusterService) JoinCluster(ctx context.Context, req *pb.JoinClusterRequest) (*pb.JoinClusterResponse, error) {
	s := c.s
	s.joinMu.Lock()
	defer s.joinMu.Unlock()
	if role := s.role(); role != "" {
		return nil, s.alreadyMember(role, callerOf(ctx).loopback)
	}
	tok, err := pki.ParseToken(req.Token)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	key, err := pki.NewKey()
	if err != nil {
		return nil, toStatus(err)
	}
	csr, err := pki.CSR(key, s.nodeID)
	if err != nil {
		return nil, toStatus(err)
	}
	conn, err := grpc.NewClient(req.Server, grpc.WithTransportCredentials(credentials.NewTLS(pki.JoinConfig(tok.Digest, nil))))
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "join: server %q: %v", req.Server, err)
	}
	defer conn.Close()
	resp, err := s.askJoin(ctx, conn, &pb.JoinRequest{Token: req.Token, Csr: csr, NodeId: s.nodeID,
		Address: s.cfg.Advertise, Role: req.Role, Protocol: Protocol})
	if err != nil {
		st := status.Convert(err)
		return nil, status.Errorf(st.Code(), "joining through %s: %s", req.Server, st.Message())
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		return nil, toStatus(err)
	}
	files := &pki.NodeFiles{CACert: resp.CaCertificate, CAKey: resp.CaKey, Cert: resp.Certificate, Key: keyPEM}
	if err := s.persistMembership(files, resp.Role); err != nil {
		return nil, toStatus(err)
	}
	// The agent of a worker reaches the cluster through the manager it
	// joined by until it learns the others from its heartbeats.
	if err := pki.WriteFile(filepath.Join(s.cfg.DataDir, joinedFile), []byte(req.Server+"\n")); err != nil {
		return nil, toStatus(err)
	}
	if err := s.become(resp.Role, files, false); err != nil {
		return nil, toStatus(err)
	}
	if resp.Role == roleManager {
		// The join is done once this manager votes: a cluster told it has
		// one more manager then tolerates the loss it expects.
		if err := s.waitVoter(ctx, req.Server); err != nil {
			s.keepJoining()
			return nil, err
		}
	}
	return &pb.JoinClusterResponse{NodeId: s.nodeID, Role: resp.Role}, nil
}

// IssueUser signs a user's certificate: the role is always user, whatever
// the request says, so the certificate carries no right of its own.
func (c *clusterService) IssueUser(ctx context.Context, req *pb.IssueUserRequest) (*pb.IssueUserResponse, error) {
	if userOf(ctx) != nil {
		return nil, status.Error(codes.PermissionDenied, "only the cluster admin issues user certificates")
	}
	if err := legion.ValidName(req.Name); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "user name %q: %v", req.Name, err)
	}
	switch req.Name {
	case "admin":
		return nil, status.Error(codes.InvalidArgument, `user name "admin": reserved for the cluster admin`)
	}
	ca := c.s.caNow()
	if ca == nil || ca.Key == nil {
		return nil, notApplied("this daemon holds no CA key: ask another manager")
	}
	cert, err := ca.Issue(req.Csr, pki.Identity{Name: req.Name, Role: pki.RoleUser}, nil, c.s.cfg.Now())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "user %s: %v", req.Name, err)
	}
	c.s.log.Info("user certificate issued", "user", req.Name)
	return &pb.IssueUserResponse{Certificate: cert, CaCertificate: ca.CertPEM()}, nil
}
