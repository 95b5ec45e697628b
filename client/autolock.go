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

// AutolockResult is what an autolock action answers.
type AutolockResult struct {
	// Key is the unlock key (LGN-UNLOCK-...) for every action but
	// disable.
	Key string
	// LeaderKeys is why the leader could not bring its own private keys
	// to the new setting as it answered ("" when it did, and for show).
	// It tries again at its next check, as every manager does.
	LeaderKeys string
}

// Autolock enables, shows, rotates or disables the cluster's unlock key
// (cluster admin only).
func (c *Client) Autolock(ctx context.Context, action string) (AutolockResult, error) {
	r, err := c.cluster.Autolock(ctx, &pb.AutolockRequest{Action: action})
	if err != nil {
		return AutolockResult{}, wrap(err)
	}
	return AutolockResult{Key: r.Key, LeaderKeys: r.LeaderKeysError}, nil
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
