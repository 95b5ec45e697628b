package dispatcher

import (
	"context"
	"fmt"
	"reflect"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/jsonfast"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Report replaces a task's status with what its node reports, keeping its
// spec, retrying when the planner wrote the task meanwhile, and writing
// nothing when the status is already the one stored. A node reports only
// the tasks assigned to it, and, when it names the task's uid, only the
// task it runs: the planner gives a deleted task's name to its
// replacement, whose status the old pod's last reports must not take.
func (s *Service) Report(ctx context.Context, req *legionpb.ReportRequest) (*legionpb.ReportResponse, error) {
	id, leaf, by, err := nodeCaller(ctx, req.GetNode())
	if err != nil {
		return nil, err
	}
	var ts legion.TaskStatus
	if err := jsonfast.Unmarshal(req.GetStatus(), &ts); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "status: expected the JSON of a task status: %v", err)
	}
	st, err := s.replica()
	if err != nil {
		return nil, err
	}
	if !st.IsLeader() {
		c, fctx, err := s.relay(ctx, st, id, leaf, by)
		if err != nil {
			return nil, err
		}
		fwd := proto.Clone(req).(*legionpb.ReportRequest)
		fwd.Node = id.Name
		return c.Report(fctx, fwd)
	}
	if err := s.checkCaller(ctx, st, id, leaf, by); err != nil {
		return nil, err
	}
	// What is written: the status alone, over the stored task's.
	w := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
		Metadata: legion.Metadata{Namespace: req.GetNamespace(), Name: req.GetName()}}, Status: ts}
	for attempt := 0; ; attempt++ {
		var t reportedTask
		if _, err := st.Decode(legion.KindTask, req.GetNamespace(), req.GetName(), &t); err != nil {
			return nil, s.statusOf(err)
		}
		if uid := req.GetUid(); uid != "" && t.Metadata.UID != uid {
			return nil, status.Errorf(codes.NotFound, "task %s/%s (uid %s) was deleted: the task of that name now is another (uid %s)",
				req.GetNamespace(), req.GetName(), uid, t.Metadata.UID)
		}
		if t.Spec.Node != id.Name {
			return nil, status.Errorf(codes.PermissionDenied, "task %s/%s is assigned to node %q, not to %s", req.GetNamespace(), req.GetName(), t.Spec.Node, id.Name)
		}
		// An agent that reports again what is stored (after a reconnect,
		// or a retry whose first try landed) costs no Raft write.
		if reflect.DeepEqual(t.Status, ts) {
			return &legionpb.ReportResponse{}, nil
		}
		err := st.WriteStatus(ctx, w, store.Precondition{Version: t.Metadata.Version})
		if err == nil {
			return &legionpb.ReportResponse{}, nil
		}
		if !retryable(err) || attempt >= maxAttempts {
			return nil, s.statusOf(fmt.Errorf("task %s/%s: %w", req.GetNamespace(), req.GetName(), err))
		}
	}
}

// reportedTask is what a report reads of the stored task: the whole spec
// is most of a task's bytes, and every status change of every task is a
// report to the leader.
type reportedTask struct {
	Metadata struct {
		UID     string `json:"uid"`
		Version uint64 `json:"version"`
	} `json:"metadata"`
	Spec struct {
		Node string `json:"node"`
	} `json:"spec"`
	Status legion.TaskStatus `json:"status"`
}
