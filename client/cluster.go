package client

import (
	"context"

	pb "github.com/legionbsd/legion/internal/proto"
)

// Init makes the fresh daemon this client reaches the first manager of a
// new cluster; it answers with the path of the admin credentials it wrote.
func (c *Client) Init(ctx context.Context) (*pb.InitResponse, error) {
	r, err := c.cluster.Init(ctx, &pb.InitRequest{})
	return r, wrap(err)
}

// JoinCluster makes the fresh daemon this client reaches join the
// cluster of the manager at server, with a join token. role may be empty
// (the token's).
func (c *Client) JoinCluster(ctx context.Context, token, server, role string) (*pb.JoinClusterResponse, error) {
	r, err := c.cluster.JoinCluster(ctx, &pb.JoinClusterRequest{Token: token, Server: server, Role: role})
	return r, wrap(err)
}

// Status describes the manager reached and its cluster.
func (c *Client) Status(ctx context.Context) (*pb.StatusResponse, error) {
	r, err := c.cluster.Status(ctx, &pb.StatusRequest{})
	return r, wrap(err)
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
