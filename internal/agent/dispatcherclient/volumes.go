package dispatcherclient

import (
	"context"
	"fmt"

	"github.com/legionbsd/legion"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// ClaimVolume takes a Volume for task, one of this node's, before the
// task uses it; backend says how the node keeps the data and snapshots,
// when not nil, which snapshots of it the node holds. The leader decides:
// a Volume held by another node, or moving, is refused with
// FAILED_PRECONDITION naming why (status.Code sees it through the
// wrapping). It returns the Volume as stored after the claim.
func (s *Session) ClaimVolume(ctx context.Context, namespace, name, task, backend string, snapshots []string) (*legion.Volume, error) {
	return s.claim(ctx, "claim of volume "+namespace+"/"+name,
		&legionpb.ClaimVolumeRequest{Node: s.cfg.Node, Namespace: namespace, Name: name, Task: task, Backend: backend,
			Snapshots: snapshots, WithSnapshots: snapshots != nil})
}

// ReleaseVolume lets go of a Volume once no task of this node uses it and
// it is unmounted and detached.
func (s *Session) ReleaseVolume(ctx context.Context, namespace, name string) error {
	_, err := s.claim(ctx, "release of volume "+namespace+"/"+name,
		&legionpb.ClaimVolumeRequest{Node: s.cfg.Node, Namespace: namespace, Name: name, Release: true})
	return err
}

func (s *Session) claim(ctx context.Context, what string, req *legionpb.ClaimVolumeRequest) (*legion.Volume, error) {
	var raw []byte
	err := s.write(ctx, what, func(ctx context.Context, c legionpb.DispatcherClient) error {
		r, err := c.ClaimVolume(ctx, req)
		if err == nil {
			raw = r.GetVolume()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return decodeVolume(raw)
}

func decodeVolume(raw []byte) (*legion.Volume, error) {
	o, err := legion.FromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("volume: %w", err)
	}
	v, ok := o.(*legion.Volume)
	if !ok {
		return nil, fmt.Errorf("volume: expected a Volume, got a %s", o.GetKind())
	}
	return v, nil
}
