package client

import (
	"context"
	"time"

	pb "github.com/legionbsd/legion/internal/proto"
)

// InitResult is what init made.
type InitResult struct {
	NodeID string // the new manager's node
	// AdminCredentials is the path, on the manager's host, of the admin
	// bundle (admin.pem) init wrote.
	AdminCredentials string
	// PodCIDR and ServiceCIDR are the ranges the cluster got.
	PodCIDR, ServiceCIDR string
}

// Init makes the fresh daemon this client reaches the first manager of a
// new cluster, with ranges the daemon chooses.
func (c *Client) Init(ctx context.Context) (InitResult, error) {
	return c.InitRanges(ctx, "", "")
}

// InitRanges is Init with the cluster's pod and service ranges (IPv4
// /16s); an empty one is chosen by the daemon.
func (c *Client) InitRanges(ctx context.Context, podCIDR, serviceCIDR string) (InitResult, error) {
	return c.InitWith(ctx, InitOptions{PodCIDR: podCIDR, ServiceCIDR: serviceCIDR})
}

// InitOptions are what init may be given; what is left empty the daemon
// chooses.
type InitOptions struct {
	// PodCIDR and ServiceCIDR are the cluster's ranges (IPv4 /16s).
	PodCIDR, ServiceCIDR string
	// CACert and CAKey (PEM, both or neither) are a root CA the cluster
	// takes rather than make one: the daemon checks them
	// (pki.ImportCA). Init reaches only a daemon of this host, so the key
	// does not leave it.
	CACert, CAKey []byte
}

// InitWith is Init with options.
func (c *Client) InitWith(ctx context.Context, o InitOptions) (InitResult, error) {
	r, err := c.cluster.Init(ctx, &pb.InitRequest{PodCidr: o.PodCIDR, ServiceCidr: o.ServiceCIDR, CaCert: o.CACert, CaKey: o.CAKey})
	if err != nil {
		return InitResult{}, wrap(err)
	}
	return InitResult{NodeID: r.NodeId, AdminCredentials: r.AdminCredentials, PodCIDR: r.PodCidr, ServiceCIDR: r.ServiceCidr}, nil
}

// JoinResult is how a daemon joined.
type JoinResult struct {
	NodeID string
	Role   string // manager or worker
}

// JoinCluster makes the fresh daemon this client reaches join the
// cluster of the manager at server, with a join token. role may be empty
// (the token's).
func (c *Client) JoinCluster(ctx context.Context, token, server, role string) (JoinResult, error) {
	r, err := c.cluster.JoinCluster(ctx, &pb.JoinClusterRequest{Token: token, Server: server, Role: role})
	if err != nil {
		return JoinResult{}, wrap(err)
	}
	return JoinResult{NodeID: r.NodeId, Role: r.Role}, nil
}

// Status describes the daemon reached and, on a manager, its view of the
// cluster's Raft state.
type Status struct {
	NodeID      string
	Role        string // manager, worker, or empty before init or join
	Initialized bool
	// The rest is a manager's only.
	State         string // Leader, Follower, Candidate, Shutdown
	LeaderID      string
	LeaderAddress string
	Term          uint64
	AppliedIndex  uint64
	CommitIndex   uint64
	Members       []Member
	Protocol      int // the wire protocol the daemon speaks
	// The daemon's build.
	Version, Commit, GoVersion string
	// Now is the daemon's clock as it answered; zero from older daemons.
	Now time.Time
	// Removed: the manager was taken out of the cluster (its Node
	// deleted) and serves nothing but its status. The Raft fields are
	// then its own Raft's word, not the cluster's state.
	Removed bool
}

// Member is a manager in the Raft configuration.
type Member struct {
	ID, Address string
	Voter       bool // a learner otherwise, until it catches up
	Leader      bool
	// Reachability is Leader, Reachable or Unreachable, as the manager
	// answering found it.
	Reachability string
}

// Status describes the daemon reached; a fresh daemon of this host
// answers without credentials.
func (c *Client) Status(ctx context.Context) (Status, error) {
	r, err := c.cluster.Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return Status{}, wrap(err)
	}
	st := Status{NodeID: r.NodeId, Role: r.Role, Initialized: r.Initialized, State: r.State, LeaderID: r.LeaderId,
		LeaderAddress: r.LeaderAddress, Term: r.Term, AppliedIndex: r.AppliedIndex, CommitIndex: r.CommitIndex, Protocol: int(r.Protocol),
		Version: r.Version, Commit: r.Commit, GoVersion: r.GoVersion, Removed: r.Removed}
	if r.NowUnixNano != 0 {
		st.Now = time.Unix(0, r.NowUnixNano)
	}
	for _, m := range r.Members {
		st.Members = append(st.Members, Member{ID: m.Id, Address: m.Address, Voter: m.Voter, Leader: m.Leader,
			Reachability: m.Reachability})
	}
	return st, nil
}

// Token shows the join token of a role (worker or manager).
func (c *Client) Token(ctx context.Context, role string) (string, error) {
	r, err := c.cluster.TokenShow(ctx, &pb.TokenRequest{Role: role})
	if err != nil {
		return "", wrap(err)
	}
	return r.Token, nil
}

// RotateToken replaces a role's join token and returns the new one; the
// old one stops working.
func (c *Client) RotateToken(ctx context.Context, role string) (string, error) {
	r, err := c.cluster.TokenRotate(ctx, &pb.TokenRequest{Role: role})
	if err != nil {
		return "", wrap(err)
	}
	return r.Token, nil
}

// IssueUser has the cluster sign a user's certificate request (cluster
// admin only) and returns the certificate and the cluster's CA, both PEM.
func (c *Client) IssueUser(ctx context.Context, name string, csrPEM []byte) (cert, ca []byte, err error) {
	r, err := c.cluster.IssueUser(ctx, &pb.IssueUserRequest{Name: name, Csr: csrPEM})
	if err != nil {
		return nil, nil, wrap(err)
	}
	return r.Certificate, r.CaCertificate, nil
}

// SetVoter promotes (voter) or demotes a manager's vote in Raft (cluster
// admin only); changed is false when it already was what was asked.
func (c *Client) SetVoter(ctx context.Context, node string, voter bool) (changed bool, err error) {
	r, err := c.cluster.SetVoter(ctx, &pb.SetVoterRequest{Node: node, Voter: voter})
	if err != nil {
		return false, wrap(err)
	}
	return r.Changed, nil
}
