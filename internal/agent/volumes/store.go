package volumes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/legionbsd/legion"
)

// Errors callers branch on.
var (
	// ErrOtherVolume: the node holds data of that name made for another
	// Volume (another UID), e.g. one deleted and made again; it is never
	// handed to the new one.
	ErrOtherVolume = errors.New("volume data belongs to another volume of that name")
	// ErrNoSnapshot: the snapshot asked for does not exist.
	ErrNoSnapshot = errors.New("volume snapshot does not exist")
	// ErrExists: a restore found data of that name on the node.
	ErrExists = errors.New("volume data of that name exists on this node")
	// ErrNoVolume: the node holds no data of that name.
	ErrNoVolume = errors.New("volume data does not exist on this node")
)

// Ref names a Volume and the object it was made for.
type Ref struct{ Namespace, Name, UID string }

// Owner is who owns a new volume's root. The zero Owner is root:root with
// mode 0755; GroupWritable makes it 02775 (setgid, for a pod's fsGroup).
type Owner struct {
	UID, GID      int
	GroupWritable bool
}

// Local is a volume this node holds, with its snapshots oldest first.
type Local struct {
	Ref
	Snapshots []string
}

// Store keeps volumes' data on this node.
type Store interface {
	// Format is the stream form Send writes and Receive reads: "zfs" or
	// "dir" (legion.VolumeBackupHeader.Backend).
	Format() string
	// Describe says how the node keeps a volume, for Volume.status.backend.
	Describe(namespace, name string) string
	// Ensure makes the volume if missing (size in bytes, 0 unbounded), its
	// root owned by owner when made and never changed later, and returns
	// the host path to mount. Data of that name made for another UID is
	// refused with ErrOtherVolume.
	Ensure(ctx context.Context, ref Ref, size int64, owner Owner) (path string, err error)
	// Resize makes a volume there already hold size (0 unbounded), as
	// Ensure does; a size below what the data uses is refused.
	Resize(ctx context.Context, ref Ref, size int64) error
	// List returns the volumes this node holds.
	List(ctx context.Context) ([]Local, error)
	// Snapshot takes snap; one that exists already is kept.
	Snapshot(ctx context.Context, namespace, name, snap string) error
	// Rollback returns the volume to snap, then drops snap and any later
	// snapshot; a missing snap answers ErrNoSnapshot.
	Rollback(ctx context.Context, namespace, name, snap string) error
	// DropSnapshots drops the snapshots named prefix* except keep.
	DropSnapshots(ctx context.Context, namespace, name, prefix, keep string) error
	// Send writes snap (taken first if missing) to w: all of it when from
	// is "", else what changed since from.
	Send(ctx context.Context, namespace, name, snap, from string, w io.Writer) error
	// Receive reads a stream Send wrote into ref's volume: a full one
	// replaces any stale copy; an incremental one applies onto the full
	// copy received before (again if it was received already). A stream
	// cut short leaves no part copy and the previous state.
	Receive(ctx context.Context, ref Ref, size int64, incremental bool, r io.Reader) error
	// Restore is a full Receive that refuses with ErrExists when the node
	// holds data of that name, for restoring a backup: it never replaces
	// data.
	Restore(ctx context.Context, ref Ref, size int64, r io.Reader) error
	// Destroy removes the volume and its snapshots; a missing one is gone
	// already.
	Destroy(ctx context.Context, namespace, name string) error
}

// checkName refuses a namespace or name that could leave the volumes'
// root or name something else than one volume.
func checkName(namespace, name string) error {
	if err := legion.ValidName(namespace); err != nil {
		return fmt.Errorf("volume namespace: %w", err)
	}
	if err := legion.ValidName(name); err != nil {
		return fmt.Errorf("volume name: %w", err)
	}
	return nil
}

// maxUID bounds a Volume's uid as kept beside its data.
const maxUID = 128

// maxSnapshotName bounds a snapshot name, well inside ZFS's limit on a
// whole dataset@snap name (255).
const maxSnapshotName = 100

// checkSnap allows the characters ZFS allows in a snapshot name except
// space, so a name is the same on both backends and safe as a file name.
func checkSnap(field, snap string) error {
	if snap == "" {
		return fmt.Errorf("%s: missing", field)
	}
	if len(snap) > maxSnapshotName {
		return fmt.Errorf("%s: %d characters, at most %d allowed", field, len(snap), maxSnapshotName)
	}
	if snap[0] == '.' {
		return fmt.Errorf("%s: %q must not start with '.'", field, snap)
	}
	for i := 0; i < len(snap); i++ {
		c := snap[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return fmt.Errorf("%s: %q: only letters, digits and '-', '_', '.', ':' are allowed", field, snap)
		}
	}
	return nil
}

// RestoredUID marks a copy restored from a backup before its Volume was
// made (the leader makes the Volume once the node holds the data, so the
// uid is not known yet): the first Ensure takes it for the Volume's.
const RestoredUID = legion.RestoredVolumeUID

// restoredRef gives a restore without a uid the restored mark.
func restoredRef(ref Ref) Ref {
	if ref.UID == "" {
		ref.UID = RestoredUID
	}
	return ref
}

func checkRef(ref Ref) error {
	if err := checkName(ref.Namespace, ref.Name); err != nil {
		return err
	}
	if ref.UID == "" {
		return fmt.Errorf("volume %s/%s: uid missing", ref.Namespace, ref.Name)
	}
	if len(ref.UID) > maxUID {
		return fmt.Errorf("volume %s/%s: uid: %d characters, at most %d allowed", ref.Namespace, ref.Name, len(ref.UID), maxUID)
	}
	if strings.ContainsAny(ref.UID, " \t\r\n") {
		return fmt.Errorf("volume %s/%s: uid %q: white space is not allowed", ref.Namespace, ref.Name, ref.UID)
	}
	return nil
}
