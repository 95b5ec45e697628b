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
// the tasks assigned to it.
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
	for attempt := 0; ; attempt++ {
		o, _, err := st.Get(legion.KindTask, req.GetNamespace(), req.GetName())
		if err != nil {
			return nil, s.statusOf(err)
		}
		t := o.(*legion.Task)
		if t.Spec.Node != id.Name {
			return nil, status.Errorf(codes.PermissionDenied, "task %s/%s is assigned to node %q, not to %s", req.GetNamespace(), req.GetName(), t.Spec.Node, id.Name)
		}
		// An agent that reports again what is stored (after a reconnect,
		// or a retry whose first try landed) costs no Raft write.
		if reflect.DeepEqual(t.Status, ts) {
			return &legionpb.ReportResponse{}, nil
		}
		t.Status = ts
		_, err = st.PutStatus(ctx, t, store.Precondition{Version: t.Metadata.Version})
		if err == nil {
			return &legionpb.ReportResponse{}, nil
		}
		if !retryable(err) || attempt >= maxAttempts {
			return nil, s.statusOf(fmt.Errorf("task %s/%s: %w", req.GetNamespace(), req.GetName(), err))
		}
	}
}
