package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// ClaimVolume binds a Volume to the calling node for its tasks, or lets
// go of it (6.7). Only the leader decides: a follower sends the agent to
// it, as for reports. Each decision reads the Volume, checks it and
// writes its status with the version read as a precondition, so two
// nodes claiming at once cannot both win.
func (s *Service) ClaimVolume(ctx context.Context, req *legionpb.ClaimVolumeRequest) (*legionpb.ClaimVolumeResponse, error) {
	id, leaf, err := caller(ctx, req.GetNode())
	if err != nil {
		return nil, err
	}
	if err := checkClaim(req); err != nil {
		return nil, err
	}
	st, err := s.leaderStore()
	if err != nil {
		return nil, err
	}
	if err := s.holds(ctx, st, id, leaf, true); err != nil {
		return nil, err
	}
	ns, name := req.GetNamespace(), req.GetName()
	for attempt := 0; ; attempt++ {
		o, _, err := st.Get(legion.KindVolume, ns, name)
		if err != nil {
			return nil, s.statusOf(err)
		}
		v, ok := o.(*legion.Volume)
		if !ok {
			return nil, status.Errorf(codes.Internal, "volume %s/%s: stored as a %s", ns, name, o.GetKind())
		}
		if !req.GetRelease() {
			if err := s.mounts(st, id.Name, v, req.GetTask()); err != nil {
				return nil, err
			}
		}
		var write bool
		if req.GetRelease() {
			write = Release(v, id.Name)
		} else if write, err = Claim(v, id.Name, req.GetBackend(), snapshotsOf(req)); err != nil {
			return nil, err
		}
		if !write {
			return volumeResponse(v)
		}
		stored, err := st.PutStatus(ctx, v, store.Precondition{Version: v.Metadata.Version})
		if err == nil {
			return volumeResponse(stored)
		}
		if !retryable(err) || attempt >= maxAttempts {
			return nil, s.statusOf(fmt.Errorf("volume %s/%s: %w", ns, name, err))
		}
	}
}

// checkClaim refuses a request that names what its kind does not take.
func checkClaim(req *legionpb.ClaimVolumeRequest) error {
	switch {
	case req.GetNamespace() == "":
		return status.Error(codes.InvalidArgument, "namespace: required")
	case req.GetName() == "":
		return status.Error(codes.InvalidArgument, "name: required")
	case req.GetRelease() && req.GetTask() != "":
		return status.Errorf(codes.InvalidArgument, "task: %q given with a release, which names no task", req.GetTask())
	case req.GetRelease() && req.GetBackend() != "":
		return status.Errorf(codes.InvalidArgument, "backend: %q given with a release, which names no backend", req.GetBackend())
	case req.GetRelease() && (req.GetWithSnapshots() || len(req.GetSnapshots()) > 0):
		return status.Error(codes.InvalidArgument, "snapshots: given with a release, which says nothing of the data")
	case !req.GetRelease() && req.GetTask() == "":
		return status.Error(codes.InvalidArgument, "task: a claim names the node's task that mounts the volume")
	}
	return nil
}

// mounts checks that task is a live task of node that mounts v: a node
// claims only for its own tasks.
func (s *Service) mounts(st *store.Store, node string, v *legion.Volume, task string) error {
	ns, name := v.Metadata.Namespace, v.Metadata.Name
	o, _, err := st.Get(legion.KindTask, ns, task)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return status.Errorf(codes.PermissionDenied, "task %s/%s does not exist, so node %s may not claim volume %s/%s for it", ns, task, node, ns, name)
		}
		return s.statusOf(err)
	}
	t, ok := o.(*legion.Task)
	if !ok {
		return status.Errorf(codes.Internal, "task %s/%s: stored as a %s", ns, task, o.GetKind())
	}
	switch {
	case t.Spec.Node != node:
		return status.Errorf(codes.PermissionDenied, "task %s/%s is assigned to node %q, not to %s: it cannot claim volume %s/%s for it", ns, task, t.Spec.Node, node, ns, name)
	case t.Status.State.Terminal() || t.Spec.DesiredState.Terminal():
		return status.Errorf(codes.PermissionDenied, "task %s/%s is %s (desired %s): it cannot claim volume %s/%s", ns, task, t.Status.State, t.Spec.DesiredState, ns, name)
	}
	for _, ref := range t.Spec.Volumes {
		if ref == name {
			return nil
		}
	}
	return status.Errorf(codes.PermissionDenied, "task %s/%s does not mount volume %s/%s", ns, task, ns, name)
}

// snapshotsOf is what a claim says of the Volume's snapshots on the node:
// nil when it says nothing (an agent from before), else the list, empty
// for none.
func snapshotsOf(req *legionpb.ClaimVolumeRequest) []string {
	if !req.GetWithSnapshots() {
		return nil
	}
	return append([]string{}, req.GetSnapshots()...)
}

// Claim decides node's claim of v, changing v's status as it is to be
// stored; write says whether it changed. A shared Volume is never bound.
// Others are bound to the first claimer and refused to the rest with
// FAILED_PRECONDITION; while one moves, only the node it moves from may
// claim it, and only while the full copy is being made (its task still
// runs there). snapshots, when not nil, are the Volume's snapshots on the
// node, which the holder's claims keep in its status.
func Claim(v *legion.Volume, node, backend string, snapshots []string) (write bool, err error) {
	if v.Spec.Shared() {
		return false, nil
	}
	ns, name := v.Metadata.Namespace, v.Metadata.Name
	if m := v.Status.Migration; m != nil && (node != m.From || m.State != legion.MigrationCopying) {
		return false, status.Errorf(codes.FailedPrecondition, "volume %s/%s is moving from %s to %s", ns, name, m.From, m.To)
	}
	switch v.Status.Node {
	case "":
		if v.Spec.Driver == legion.DriverZFS && v.Spec.Node != "" && v.Spec.Node != node {
			return false, status.Errorf(codes.FailedPrecondition, "volume %s/%s is asked to be on node %s", ns, name, v.Spec.Node)
		}
		v.Status.Node, v.Status.Backend, v.Status.Message = node, backend, ""
		v.Status.Snapshots = slices.Clip(snapshots)
		return true, nil
	case node:
		if v.Status.Backend != backend {
			v.Status.Backend, write = backend, true
		}
		if snapshots != nil && !slices.Equal(v.Status.Snapshots, snapshots) {
			v.Status.Snapshots, write = slices.Clip(snapshots), true
		}
		return write, nil
	}
	return false, status.Errorf(codes.FailedPrecondition, "volume %s/%s is held by node %s", ns, name, v.Status.Node)
}

// Release decides node's letting go of v, changing v's status as it is to
// be stored; it says whether it changed. A ZFS Volume stays bound (its
// data is on the node), a shared one was never bound, and a node that
// does not hold a Volume has nothing to let go of.
func Release(v *legion.Volume, node string) bool {
	if v.Spec.Shared() || v.Spec.Driver == legion.DriverZFS || v.Status.Node != node {
		return false
	}
	v.Status.Node, v.Status.Backend = "", ""
	return true
}

func volumeResponse(v legion.Object) (*legionpb.ClaimVolumeResponse, error) {
	data, err := legion.MarshalJSON(v)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s/%s: %v", v.GetMetadata().Namespace, v.GetMetadata().Name, err)
	}
	return &legionpb.ClaimVolumeResponse{Volume: data}, nil
}
