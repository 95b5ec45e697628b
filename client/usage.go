package client

import (
	"context"
	"time"

	"github.com/legionbsd/legion"
	pb "github.com/legionbsd/legion/internal/proto"
)

// Usage is what running tasks use, as their nodes last reported it to the
// leader, sorted by namespace and task. Only tasks in namespaces the
// caller may read are returned; namespace narrows it to one (empty: all).
func (c *Client) Usage(ctx context.Context, namespace string) ([]legion.Usage, error) {
	r, err := c.cluster.Usage(ctx, &pb.UsageRequest{Namespace: namespace})
	if err != nil {
		return nil, wrap(err)
	}
	out := make([]legion.Usage, len(r.Tasks))
	for i, u := range r.Tasks {
		out[i] = legion.Usage{Namespace: u.Namespace, Task: u.Task, Node: u.Node,
			Time: time.UnixMilli(u.TimeUnixMs), CPU: legion.CPU(u.CpuMillis), Memory: legion.Bytes(u.MemoryBytes)}
	}
	return out, nil
}
