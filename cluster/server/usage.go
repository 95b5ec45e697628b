package server

import (
	"context"
	"sort"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/rbac"
	pb "github.com/legionbsd/legion/internal/proto"
)

// Usage answers from the usage the leader's dispatcher keeps from the
// nodes' heartbeats; a follower asks the leader. The caller's rights are
// read from this manager's replica before anything is forwarded, and the
// answer is cut to the namespaces the caller may read tasks in.
func (c *clusterService) Usage(ctx context.Context, req *pb.UsageRequest) (*pb.UsageResponse, error) {
	a, err := c.s.accessOf(ctx)
	if err != nil {
		return nil, err
	}
	if req.Namespace != "" {
		if err := a.check(rbac.Read, legion.KindTask, req.Namespace); err != nil {
			return nil, err
		}
	}
	st, conn, fctx, err := c.s.leader(ctx)
	if err != nil {
		return nil, err
	}
	var all []*pb.TaskUsageReport
	if conn != nil {
		r, err := pb.NewClusterClient(conn).Usage(fctx, req)
		if err != nil {
			return nil, err
		}
		all = r.Tasks
	} else {
		for _, u := range c.s.disp.Usage() {
			if req.Namespace != "" && u.Namespace != req.Namespace {
				continue
			}
			// A report is believed only while the task is placed on the
			// node that sent it: a task moved or deleted since is dropped.
			o, _, err := st.Get(legion.KindTask, u.Namespace, u.Task)
			if err != nil {
				continue
			}
			if t, ok := o.(*legion.Task); !ok || t.Spec.Node != u.Node {
				continue
			}
			all = append(all, &pb.TaskUsageReport{Namespace: u.Namespace, Task: u.Task, Node: u.Node,
				TimeUnixMs: u.Time.UnixMilli(), CpuMillis: int64(u.CPU), MemoryBytes: int64(u.Memory)})
		}
	}
	out := &pb.UsageResponse{}
	for _, u := range all {
		if a.check(rbac.Read, legion.KindTask, u.Namespace) == nil {
			out.Tasks = append(out.Tasks, u)
		}
	}
	sort.Slice(out.Tasks, func(i, j int) bool {
		x, y := out.Tasks[i], out.Tasks[j]
		if x.Namespace != y.Namespace {
			return x.Namespace < y.Namespace
		}
		return x.Task < y.Task
	})
	return out, nil
}

// usageMethod is open to user certificates: the handler keeps what the
// user may read.
const usageMethod = "/legion.v1.Cluster/Usage"
