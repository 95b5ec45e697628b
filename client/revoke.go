package client

import (
	"context"

	pb "github.com/legionbsd/legion/internal/proto"
)

// RevokeUser removes every RoleBinding of user in one request (cluster
// admin only) and returns those it removed, as namespace/name. The user's
// open watches and sessions end within seconds; its certificate gives no
// right from then on.
func (c *Client) RevokeUser(ctx context.Context, user string) ([]string, error) {
	r, err := c.cluster.RevokeUser(ctx, &pb.RevokeUserRequest{User: user})
	if err != nil {
		return nil, wrap(err)
	}
	return r.Removed, nil
}

// CARotation is the state of the cluster's root CA.
type CARotation struct {
	Digest         string   // the CA certificates are issued under now
	PreviousDigest string   // the CA still trusted until every node renewed; empty when none
	Pending        []string // nodes not yet renewed under Digest
	Started        bool     // this call started the rotation
}

// RotateCA starts a rotation to a new root CA (cluster admin only): nodes
// renew under it on their own, and once all have, the old CA is refused.
// With statusOnly it starts nothing and reports the rotation under way.
func (c *Client) RotateCA(ctx context.Context, statusOnly bool) (CARotation, error) {
	r, err := c.cluster.RotateCA(ctx, &pb.RotateCARequest{StatusOnly: statusOnly})
	if err != nil {
		return CARotation{}, wrap(err)
	}
	return CARotation{Digest: r.Digest, PreviousDigest: r.PreviousDigest, Pending: r.Pending, Started: r.Started}, nil
}
