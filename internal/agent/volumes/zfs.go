package volumes

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/sys"
	"github.com/legionbsd/legion/zfs"
)

// uidProp is the user property naming the Volume a dataset was made for.
const uidProp = "legion:uid"

// ZFS keeps each volume as a dataset <root>/volumes/<ns>/<name>, its size
// as the dataset's quota. Streams are zfs send streams.
type ZFS struct {
	z    *zfs.ZFS
	r    sys.Runner
	root string
}

// NewZFS keeps volumes under root (the node's ZFS root, e.g.
// zroot/legion). Send and Receive need r to be a sys.Streamer.
func NewZFS(r sys.Runner, root string) *ZFS {
	return &ZFS{z: zfs.New(r), r: r, root: strings.TrimRight(root, "/")}
}

var _ Store = (*ZFS)(nil)

func (s *ZFS) parent() string { return s.root + "/volumes" }

func (s *ZFS) dataset(namespace, name string) string {
	return s.parent() + "/" + namespace + "/" + name
}

// Format implements Store.
func (s *ZFS) Format() string { return "zfs" }

// Describe implements Store.
func (s *ZFS) Describe(namespace, name string) string {
	return "zfs dataset " + s.dataset(namespace, name)
}

// uidOf reads the dataset's legion:uid; ErrNoVolume when it is missing.
func (s *ZFS) uidOf(ctx context.Context, ds string) (string, error) {
	v, err := s.z.Get(ctx, ds, uidProp)
	if errors.Is(err, zfs.ErrNotFound) {
		return "", fmt.Errorf("dataset %s: %w", ds, ErrNoVolume)
	}
	if err != nil {
		return "", err
	}
	return v, nil
}

// checkUID refuses a dataset made for another Volume; one without the
// property was not made by Legion for this Volume either.
func checkUID(ds, have, want string) error {
	if have == want {
		return nil
	}
	if have == "-" || have == "" {
		have = "none"
	}
	return fmt.Errorf("dataset %s: %s is %s, the volume's uid is %s: %w", ds, uidProp, have, want, ErrOtherVolume)
}

func quotaProps(ref Ref, size int64) map[string]string {
	props := map[string]string{uidProp: ref.UID}
	if size > 0 {
		props["quota"] = strconv.FormatInt(size, 10)
	}
	return props
}

// Ensure implements Store.
func (s *ZFS) Ensure(ctx context.Context, ref Ref, size int64, owner Owner) (string, error) {
	if err := checkRef(ref); err != nil {
		return "", err
	}
	if size < 0 {
		return "", fmt.Errorf("volume %s/%s: size %d: must not be negative", ref.Namespace, ref.Name, size)
	}
	ds := s.dataset(ref.Namespace, ref.Name)
	have, err := s.uidOf(ctx, ds)
	made := false
	switch {
	case errors.Is(err, ErrNoVolume):
		if err := s.z.Create(ctx, ds, quotaProps(ref, size)); err != nil {
			return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		made = true
	case err != nil:
		return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
	case have == RestoredUID && ref.UID != RestoredUID:
		if err := s.z.Set(ctx, ds, uidProp, ref.UID); err != nil {
			return "", fmt.Errorf("volume %s/%s: taking the restored copy: %w", ref.Namespace, ref.Name, err)
		}
	default:
		if err := checkUID(ds, have, ref.UID); err != nil {
			return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	if !made {
		// The Volume's size may have changed since the dataset was made
		// (a claim resized, a restored copy): its quota follows.
		if err := s.resize(ctx, ref, ds, size); err != nil {
			return "", err
		}
	}
	// A received copy is left unmounted (zfs receive -u) until used here.
	mounted, err := s.z.Mounted(ctx, ds)
	if err != nil {
		return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if !mounted {
		if err := s.z.Mount(ctx, ds); err != nil {
			return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	mp, err := s.z.Mountpoint(ctx, ds)
	if err != nil {
		return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if made {
		if err := setOwner(mp, owner); err != nil {
			return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}
	return mp, nil
}

// Resize implements Store: the quota of a Volume's dataset, there
// already, follows its size, as when a task mounts it.
func (s *ZFS) Resize(ctx context.Context, ref Ref, size int64) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("volume %s/%s: size %d: must not be negative", ref.Namespace, ref.Name, size)
	}
	ds := s.dataset(ref.Namespace, ref.Name)
	have, err := s.uidOf(ctx, ds)
	if err != nil {
		return fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if err := checkUID(ds, have, ref.UID); err != nil {
		return fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return s.resize(ctx, ref, ds, size)
}

// resize makes the dataset's quota the Volume's size (0: none), refusing
// a size below what the dataset already uses: ZFS would refuse it too,
// and the data must not be cut.
func (s *ZFS) resize(ctx context.Context, ref Ref, ds string, size int64) error {
	have, err := s.bytesProp(ctx, ds, "quota")
	if err != nil {
		return fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if have == size {
		return nil
	}
	value := "none"
	if size > 0 {
		used, err := s.bytesProp(ctx, ds, "used")
		if err != nil {
			return fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		if used > size {
			return fmt.Errorf("volume %s/%s: size %d bytes is below the %d bytes its dataset %s already uses: not resized", ref.Namespace, ref.Name, size, used, ds)
		}
		value = strconv.FormatInt(size, 10)
	}
	if err := s.z.Set(ctx, ds, "quota", value); err != nil {
		return fmt.Errorf("volume %s/%s: resizing: %w", ref.Namespace, ref.Name, err)
	}
	return nil
}

// bytesProp reads a size property in bytes, as zfs get -p prints it.
func (s *ZFS) bytesProp(ctx context.Context, ds, prop string) (int64, error) {
	v, err := s.z.Get(ctx, ds, prop)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("dataset %s: %s is %q, expected a number of bytes", ds, prop, v)
	}
	return n, nil
}

// List implements Store: the datasets two levels below <root>/volumes
// (their snapshots are a level further down),
// with their snapshots.
func (s *ZFS) List(ctx context.Context) ([]Local, error) {
	res, err := s.r.Run(ctx, sys.Command("zfs", "list", "-H", "-p", "-r", "-d", "3", "-t", "filesystem,snapshot",
		"-s", "createtxg", "-o", "name,"+uidProp, s.parent()))
	if sys.IsExit(err, "dataset does not exist") {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list volumes under %s: %w", s.parent(), err)
	}
	var out []Local
	at := map[string]int{}
	prefix := s.parent() + "/"
	for i, line := range strings.Split(string(res.Stdout), "\n") {
		if line == "" {
			continue
		}
		name, uid, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("list volumes under %s: line %d: want name and %s tab-separated, got %q", s.parent(), i+1, uidProp, line)
		}
		ds, snap, isSnap := strings.Cut(name, "@")
		rest, under := strings.CutPrefix(ds, prefix)
		ns, vol, two := strings.Cut(rest, "/")
		if !under || !two || strings.Contains(vol, "/") {
			continue // the root, a namespace, or something not ours
		}
		if !isSnap {
			if uid == "-" {
				continue // not made by Legion
			}
			at[ds] = len(out)
			out = append(out, Local{Ref: Ref{Namespace: ns, Name: vol, UID: uid}})
			continue
		}
		if j, ok := at[ds]; ok {
			out[j].Snapshots = append(out[j].Snapshots, snap)
		}
	}
	return out, nil
}

// Snapshot implements Store.
func (s *ZFS) Snapshot(ctx context.Context, namespace, name, snap string) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	if err := checkSnap("snapshot", snap); err != nil {
		return err
	}
	err := s.z.Snapshot(ctx, s.dataset(namespace, name)+"@"+snap)
	if errors.Is(err, zfs.ErrExists) {
		return nil
	}
	if errors.Is(err, zfs.ErrNotFound) {
		return fmt.Errorf("volume %s/%s: %w: %w", namespace, name, ErrNoVolume, err)
	}
	return err
}

// Rollback implements Store.
func (s *ZFS) Rollback(ctx context.Context, namespace, name, snap string) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	if err := checkSnap("snapshot", snap); err != nil {
		return err
	}
	full := s.dataset(namespace, name) + "@" + snap
	err := s.z.Rollback(ctx, full)
	if errors.Is(err, zfs.ErrNotFound) {
		return fmt.Errorf("volume %s/%s: snapshot %s: %w", namespace, name, snap, ErrNoSnapshot)
	}
	if err != nil {
		return err
	}
	return s.z.Destroy(ctx, full, false)
}

// DropSnapshots implements Store.
func (s *ZFS) DropSnapshots(ctx context.Context, namespace, name, prefix, keep string) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	ds := s.dataset(namespace, name)
	snaps, err := s.z.Snapshots(ctx, ds)
	if errors.Is(err, zfs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, snap := range snaps {
		if strings.HasPrefix(snap, prefix) && snap != keep {
			if err := s.z.Destroy(ctx, ds+"@"+snap, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// Send implements Store.
func (s *ZFS) Send(ctx context.Context, namespace, name, snap, from string, w io.Writer) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	if from != "" {
		if err := checkSnap("from", from); err != nil {
			return err
		}
	}
	if err := s.Snapshot(ctx, namespace, name, snap); err != nil {
		return err
	}
	err := s.z.Send(ctx, s.dataset(namespace, name)+"@"+snap, from, w)
	if errors.Is(err, zfs.ErrNotFound) {
		return fmt.Errorf("volume %s/%s: %w: %w", namespace, name, ErrNoSnapshot, err)
	}
	return err
}

// Receive implements Store. A full stream replaces a stale copy: the
// dataset is destroyed first, and so is whatever a failed receive left.
// An incremental one goes onto the full copy with -F, which rolls back a
// last part received before so it is taken on again.
func (s *ZFS) Receive(ctx context.Context, ref Ref, size int64, incremental bool, r io.Reader) error {
	return s.receive(ctx, ref, size, incremental, false, r)
}

// Restore implements Store.
func (s *ZFS) Restore(ctx context.Context, ref Ref, size int64, r io.Reader) error {
	return s.receive(ctx, restoredRef(ref), size, false, true, r)
}

func (s *ZFS) receive(ctx context.Context, ref Ref, size int64, incremental, restore bool, r io.Reader) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	ds := s.dataset(ref.Namespace, ref.Name)
	if incremental {
		have, err := s.uidOf(ctx, ds)
		if err != nil {
			return fmt.Errorf("volume %s/%s: incremental stream without the full copy: %w", ref.Namespace, ref.Name, err)
		}
		if err := checkUID(ds, have, ref.UID); err != nil {
			return fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
		}
		return s.z.Receive(ctx, ds, nil, true, r)
	}
	if restore {
		exists, err := s.z.Exists(ctx, ds)
		if err != nil {
			return err
		}
		if exists {
			return fmt.Errorf("volume %s/%s: dataset %s: %w", ref.Namespace, ref.Name, ds, ErrExists)
		}
	} else if err := s.z.Destroy(ctx, ds, true); err != nil {
		return fmt.Errorf("volume %s/%s: replace the stale copy: %w", ref.Namespace, ref.Name, err)
	}
	if err := s.z.Create(ctx, s.parent()+"/"+ref.Namespace, nil); err != nil {
		return err
	}
	err := s.z.Receive(ctx, ds, quotaProps(ref, size), false, r)
	if err == nil {
		return nil
	}
	if restore && errors.Is(err, zfs.ErrExists) {
		// Made meanwhile by someone else: theirs, not ours to destroy.
		return fmt.Errorf("volume %s/%s: %w: %w", ref.Namespace, ref.Name, ErrExists, err)
	}
	// Use a fresh context: the receive may have failed because ctx ended.
	if derr := s.z.Destroy(context.WithoutCancel(ctx), ds, true); derr != nil {
		return errors.Join(err, fmt.Errorf("drop the part copy: %w", derr))
	}
	return err
}

// Destroy implements Store.
func (s *ZFS) Destroy(ctx context.Context, namespace, name string) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	return s.z.Destroy(ctx, s.dataset(namespace, name), true)
}

// setOwner gives a new volume's root to owner: mode 0755, or 02775 when
// group-writable (setgid, so files made in it keep the group).
func setOwner(path string, owner Owner) error {
	mode := os.FileMode(0o755)
	if owner.GroupWritable {
		mode = 0o775 | os.ModeSetgid
	}
	if err := os.Chown(path, owner.UID, owner.GID); err != nil {
		return fmt.Errorf("own the volume's root: %w", err)
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("set the volume root's mode: %w", err)
	}
	return nil
}
