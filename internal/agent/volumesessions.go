package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent/volumes"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// VolumeStreams copies a local Volume's data out and in: a migration's
// copies, a backup and its restore.
type VolumeStreams interface {
	// Send writes the snapshot snap, taken first if missing (all of it,
	// or what changed since from) to w.
	Send(ctx context.Context, ns, name, snap, from string, w io.Writer) error
	// Receive takes the Volume's data from r, whole or not at all.
	Receive(ctx context.Context, ref volumes.Ref, size int64, incremental bool, r io.Reader) error
	// Restore is a full Receive refused with volumes.ErrExists where the
	// node holds data of that name.
	Restore(ctx context.Context, ref volumes.Ref, size int64, r io.Reader) error
}

// errNoVolumes refuses volume sessions on a node that keeps no Volumes.
var errNoVolumes = errors.New("this node keeps no local volumes")

// SendVolume serves a manager's offer to stream a local Volume out: the
// snapshot named, taken first if missing, dropped afterwards when the
// offer says so (a backup's), sent or not.
func (a *Agent) SendVolume(ctx context.Context, o *legionpb.VolumeSendOffer, w io.Writer) (err error) {
	a.initLog()
	if a.Volumes == nil {
		return errNoVolumes
	}
	ns, name, snap := o.GetNamespace(), o.GetVolume(), o.GetSnapshot()
	key := volumeKey(ns, name)
	if snap == "" {
		return fmt.Errorf("volume %s: snapshot: required", key)
	}
	l, err := a.local(ctx, ns, name)
	if err != nil {
		return err
	}
	if err := sameVolume(key, l, o.GetVolumeUid()); err != nil {
		return err
	}
	if o.GetDropSnapshot() {
		defer func() {
			if derr := a.Volumes.DropSnapshots(context.WithoutCancel(ctx), ns, name, snap, ""); derr != nil {
				a.log.Warn("dropping a sent snapshot", "volume", key, "snapshot", snap, "err", derr)
				err = errors.Join(err, fmt.Errorf("volume %s: dropping snapshot %s: %w", key, snap, derr))
			}
		}()
	}
	if err := a.Volumes.Send(ctx, ns, name, snap, o.GetFrom(), w); err != nil {
		return fmt.Errorf("volume %s: sending snapshot %s: %w", key, snap, err)
	}
	return nil
}

// ReceiveVolume serves a manager's offer to take a Volume's data in. A
// restore is refused where the node holds data of that name; a copy a
// task here uses is never written over.
func (a *Agent) ReceiveVolume(ctx context.Context, o *legionpb.VolumeReceiveOffer, r io.Reader) error {
	a.initLog()
	if a.Volumes == nil {
		return errNoVolumes
	}
	ns, name := o.GetNamespace(), o.GetVolume()
	key := volumeKey(ns, name)
	var spec legion.VolumeSpec
	if raw := o.GetSpec(); len(raw) > 0 {
		if err := json.Unmarshal(raw, &spec); err != nil {
			return fmt.Errorf("volume %s: spec: %w", key, err)
		}
	}
	defer a.vl.lock(key)()
	if task := a.taskUsing(ns, name); task != "" {
		return status.Errorf(codes.FailedPrecondition, "volume %s: task %s of this node uses it: not receiving over its data", key, task)
	}
	// Kept from the destroying of unwanted copies until a set names it.
	a.vl.markReceived(key)
	ref := volumes.Ref{Namespace: ns, Name: name, UID: o.GetVolumeUid()}
	if o.GetRestore() {
		if o.GetIncremental() {
			return fmt.Errorf("volume %s: a restore is a whole copy, not an increment", key)
		}
		if err := a.Volumes.Restore(ctx, ref, int64(spec.Size), r); errors.Is(err, volumes.ErrExists) {
			return status.Errorf(codes.FailedPrecondition, "volume %s: restoring: %v", key, err)
		} else if err != nil {
			return fmt.Errorf("volume %s: restoring: %w", key, err)
		}
	} else if err := a.Volumes.Receive(ctx, ref, int64(spec.Size), o.GetIncremental(), r); err != nil {
		return fmt.Errorf("volume %s: receiving: %w", key, err)
	}
	a.log.Info("received a volume's data", "volume", key, "incremental", o.GetIncremental(), "restore", o.GetRestore())
	return nil
}

// DropVolume serves a manager's offer to destroy the node's copy of a
// Volume that now lives elsewhere; refused while a task here uses it.
func (a *Agent) DropVolume(ctx context.Context, o *legionpb.VolumeDropOffer) error {
	a.initLog()
	if a.Volumes == nil {
		return errNoVolumes
	}
	ns, name := o.GetNamespace(), o.GetVolume()
	key := volumeKey(ns, name)
	defer a.vl.lock(key)()
	if task := a.taskUsing(ns, name); task != "" {
		return status.Errorf(codes.FailedPrecondition, "volume %s: task %s of this node uses it: not dropping its data", key, task)
	}
	l, err := a.local(ctx, ns, name)
	if err != nil {
		return err
	}
	if l == nil {
		return nil // dropped already
	}
	if err := sameVolume(key, l, o.GetVolumeUid()); err != nil {
		return err
	}
	a.log.Info("destroying the node's copy of a volume", "volume", key, "uid", l.UID, "reason", "dropped by the managers after a move")
	if err := a.Volumes.Destroy(ctx, ns, name); err != nil {
		return fmt.Errorf("volume %s: destroying: %w", key, err)
	}
	return nil
}

// sameVolume refuses acting on a local copy of another Volume of that
// name than the one the managers mean.
func sameVolume(key string, l *volumes.Local, uid string) error {
	if l == nil {
		return status.Errorf(codes.NotFound, "volume %s: no data of that name on this node", key)
	}
	if uid != "" && l.UID != "" && l.UID != uid {
		return status.Errorf(codes.FailedPrecondition, "volume %s: the node's copy is of Volume uid %s, not %s: %v", key, l.UID, uid, volumes.ErrOtherVolume)
	}
	return nil
}
