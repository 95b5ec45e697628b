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
