package client

import (
	"context"
	"fmt"

	"github.com/legionbsd/legion/cluster/pki"
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
	return c.rotateCA(ctx, &pb.RotateCARequest{StatusOnly: statusOnly})
}

// RotateCATo is RotateCA to a CA given rather than a new one the leader
// makes: its certificate and private key (PEM), which the manager checks
// (pki.ImportCA). The key goes to the manager over the client's mutual
// TLS connection, and from there to every manager, as the CA key does.
func (c *Client) RotateCATo(ctx context.Context, certPEM, keyPEM []byte) (CARotation, error) {
	given, err := pki.ParseCert(certPEM)
	if err != nil {
		return CARotation{}, fmt.Errorf("the CA certificate: %w", err)
	}
	r, err := c.rotateCA(ctx, &pb.RotateCARequest{CaCert: certPEM, CaKey: keyPEM})
	if err == nil && r.Started && r.Digest != pki.Digest(given) {
		// A manager from before CAs were given ignores the fields and
		// makes its own: say so rather than report the given CA taken.
		return r, fmt.Errorf("the managers rotated to a CA of their own (%s), not the one given (%s): a manager of a build from before legion ca rotate --ca-cert took the call; "+
			"once this rotation has ended (legion ca status) and the managers are upgraded, rotate again with --ca-cert", r.Digest, pki.Digest(given))
	}
	return r, err
}

func (c *Client) rotateCA(ctx context.Context, req *pb.RotateCARequest) (CARotation, error) {
	r, err := c.cluster.RotateCA(ctx, req)
	if err != nil {
		return CARotation{}, wrap(err)
	}
	return CARotation{Digest: r.Digest, PreviousDigest: r.PreviousDigest, Pending: r.Pending, Started: r.Started}, nil
}
