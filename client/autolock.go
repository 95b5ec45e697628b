package client

import (
	"context"

	pb "github.com/legionbsd/legion/internal/proto"
)

// Autolock actions.
const (
	AutolockEnable  = "enable"
	AutolockShow    = "show"
	AutolockRotate  = "rotate"
	AutolockDisable = "disable"
)

// Autolock enables, shows, rotates or disables the cluster's unlock key
// (cluster admin only). It returns the key (LGN-UNLOCK-...) for every
// action but disable.
func (c *Client) Autolock(ctx context.Context, action string) (string, error) {
	r, err := c.cluster.Autolock(ctx, &pb.AutolockRequest{Action: action})
	if err != nil {
		return "", wrap(err)
	}
	return r.Key, nil
}

// Unlock gives a locked manager of this host its unlock key; the client
// needs no credentials. It returns the manager's node id.
func (c *Client) Unlock(ctx context.Context, key string) (string, error) {
	r, err := c.cluster.Unlock(ctx, &pb.UnlockRequest{Key: key})
	if err != nil {
		return "", wrap(err)
	}
	return r.NodeId, nil
}
