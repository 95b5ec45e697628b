package agent

import (
	"context"
	"fmt"

	"github.com/legionbsd/legion/image"
)

// pull is Images.Pull with the pulls of one image asked at once (the
// replicas of a service starting side by side) made once: each asks the
// image store for its lock, reads and rewrites its index with an fsync,
// so a hundred pods starting at once queued a hundred times behind it
// (and, for an image not there yet, would each have asked the registry).
// Only calls with the same reference, namespace, policy and login share
// one; every caller gets its own copy of the record.
func (a *Agent) pull(ctx context.Context, ref string, o image.PullOptions) (*image.Record, error) {
	key := fmt.Sprintf("%s\x00%s\x00%s\x00%s", ref, o.Namespace, o.Policy, loginKey(o.Login))
	// Every worker pulls with the agent's context: the shared call ends
	// with the agent, as each of them would.
	ch := a.pulls.DoChan(key, func() (any, error) { return a.Images.Pull(ctx, ref, o) })
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		rec := *r.Val.(*image.Record)
		return &rec, nil
	}
}

func loginKey(l *image.Login) string {
	if l == nil {
		return ""
	}
	return fmt.Sprintf("%q %q %q %q", l.Username, l.Password, l.IdentityToken, l.RegistryToken)
}
