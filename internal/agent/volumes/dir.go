package volumes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Dir keeps each volume as a directory <dataDir>/volumes/<ns>/<name>:
// data/ is what containers mount, snapshots/<snap>/ are full copies, and
// volume.json records the Volume's uid, size and snapshots. A directory
// has no quota, so the size is recorded but not enforced, and Describe
// says so. Streams are tar archives.
type Dir struct {
	dataDir string

	mu    sync.Mutex
	locks map[string]*sync.Mutex // per volume: one change at a time
}

// NewDir keeps volumes under dataDir/volumes.
func NewDir(dataDir string) *Dir {
	return &Dir{dataDir: dataDir, locks: map[string]*sync.Mutex{}}
}

var _ Store = (*Dir)(nil)

// dirMeta is volume.json.
type dirMeta struct {
	UID  string `json:"uid"`
	Size int64  `json:"size,omitempty"`
	// Snapshots are copies under snapshots/, oldest first.
	Snapshots []string `json:"snapshots,omitempty"`
	// Received names the snapshots streams brought in. Their data is
	// data/ as received; no copy is kept, as a directory stream carries
	// whole files and the full list of paths, so an incremental one
	// applies onto the full copy or onto itself received before alike.
	Received []string `json:"received,omitempty"`
	// Manifests are a migration's snapshots (MoveSnapshotPrefix), sent
	// from the live data: what was sent is kept as a list of its files
	// (snapshots/<name>.json), enough to send what changed since, with no
	// copy of the data (see Send).
	Manifests []string `json:"manifests,omitempty"`
}

const (
	metaFile     = "volume.json"
	dataSub      = "data"
	snapshotsSub = "snapshots"
	// tmpPrefix marks work directories; List and a later call skip them.
	tmpPrefix = ".tmp-"
)

func (d *Dir) nsDir(namespace string) string {
	return filepath.Join(d.dataDir, "volumes", namespace)
}

func (d *Dir) volDir(namespace, name string) string {
	return filepath.Join(d.nsDir(namespace), name)
}

func (d *Dir) lock(namespace, name string) func() {
	key := namespace + "/" + name
	d.mu.Lock()
	l, ok := d.locks[key]
	if !ok {
		l = &sync.Mutex{}
		d.locks[key] = l
	}
	d.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Format implements Store.
func (d *Dir) Format() string { return "dir" }

// Describe implements Store.
func (d *Dir) Describe(namespace, name string) string {
	return "directory " + filepath.Join(d.volDir(namespace, name), dataSub) + " (size not enforced)"
}

// tempName is a fresh name for a work directory beside the final one.
func tempName(what string) string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return tmpPrefix + what + "-" + hex.EncodeToString(b[:])
}

func readMeta(vdir string) (dirMeta, error) {
	var m dirMeta
	b, err := os.ReadFile(filepath.Join(vdir, metaFile))
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Lstat(vdir); serr == nil {
			return m, fmt.Errorf("directory %s has no %s: not a volume this agent made; move it aside", vdir, metaFile)
		}
		return m, ErrNoVolume
	}
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%s: %w", filepath.Join(vdir, metaFile), err)
	}
	return m, nil
}

// writeMeta replaces volume.json whole.
func writeMeta(vdir string, m dirMeta) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return replaceFile(filepath.Join(vdir, metaFile), b)
}

// replaceFile replaces the file at p whole: written aside, synced,
// renamed, so a crash leaves the old one or the new one.
func replaceFile(p string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(p), tempName(filepath.Base(p)))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

func (m dirMeta) checkUID(vdir, uid string) error {
	if m.UID == uid {
		return nil
	}
	return fmt.Errorf("directory %s: made for uid %s, the volume's uid is %s: %w", vdir, m.UID, uid, ErrOtherVolume)
}

// recoverData puts back data/ should a rollback have stopped between
// moving it aside and moving the restored copy in.
func recoverData(vdir string) error {
	data := filepath.Join(vdir, dataSub)
	if _, err := os.Lstat(data); err == nil {
		return nil
	}
	old := filepath.Join(vdir, tmpPrefix+"data-old")
	if _, err := os.Lstat(old); err != nil {
		return fmt.Errorf("volume directory %s has no %s", vdir, dataSub)
	}
	return os.Rename(old, data)
}

// Resize implements Store: a directory has no quota to change.
func (d *Dir) Resize(ctx context.Context, ref Ref, size int64) error {
	return checkRef(ref)
}

// Ensure implements Store. A new volume is made aside and renamed into
// place whole, so a crash never leaves a half-made one.
func (d *Dir) Ensure(ctx context.Context, ref Ref, size int64, owner Owner) (string, error) {
	if err := checkRef(ref); err != nil {
		return "", err
	}
	if size < 0 {
		return "", fmt.Errorf("volume %s/%s: size %d: must not be negative", ref.Namespace, ref.Name, size)
	}
	defer d.lock(ref.Namespace, ref.Name)()
	vdir := d.volDir(ref.Namespace, ref.Name)
	data := filepath.Join(vdir, dataSub)
	m, err := readMeta(vdir)
	if err == nil && m.UID == RestoredUID && ref.UID != RestoredUID {
		m.UID = ref.UID
		if err := writeMeta(vdir, m); err != nil {
			return "", fmt.Errorf("volume %s/%s: taking the restored copy: %w", ref.Namespace, ref.Name, err)
		}
	}
	if err == nil {
		if err := m.checkUID(vdir, ref.UID); err != nil {
			return "", err
		}
		if err := recoverData(vdir); err != nil {
			return "", err
		}
		return data, nil
	}
	if !errors.Is(err, ErrNoVolume) {
		return "", err
	}
	if err := os.MkdirAll(d.nsDir(ref.Namespace), 0o755); err != nil {
		return "", err
	}
	tmp := filepath.Join(d.nsDir(ref.Namespace), tempName(ref.Name))
	if err := d.makeNew(tmp, dirMeta{UID: ref.UID, Size: size}, owner); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	if err := os.Rename(tmp, vdir); err != nil {
		_ = os.RemoveAll(tmp)
		return "", fmt.Errorf("volume %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return data, nil
}

func (d *Dir) makeNew(tmp string, m dirMeta, owner Owner) error {
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	data := filepath.Join(tmp, dataSub)
	if err := os.Mkdir(data, 0o700); err != nil {
		return err
	}
	if err := setOwner(data, owner); err != nil {
		return err
	}
	return writeMeta(tmp, m)
}

// List implements Store.
func (d *Dir) List(ctx context.Context) ([]Local, error) {
	root := filepath.Join(d.dataDir, "volumes")
	nss, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Local
	for _, ns := range nss {
		if !ns.IsDir() || strings.HasPrefix(ns.Name(), ".") {
			continue
		}
		vols, err := os.ReadDir(filepath.Join(root, ns.Name()))
		if err != nil {
			return nil, err
		}
		for _, v := range vols {
			if !v.IsDir() || strings.HasPrefix(v.Name(), ".") {
				continue
			}
			m, err := readMeta(filepath.Join(root, ns.Name(), v.Name()))
			if err != nil {
				return nil, err
			}
			out = append(out, Local{
				Ref:       Ref{Namespace: ns.Name(), Name: v.Name(), UID: m.UID},
				Snapshots: slices.Concat(m.Received, m.Snapshots, m.Manifests),
			})
		}
	}
	return out, nil
}

// Snapshot implements Store: a full copy of data/, made aside and renamed
// into place whole.
func (d *Dir) Snapshot(ctx context.Context, namespace, name, snap string) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	if err := checkSnap("snapshot", snap); err != nil {
		return err
	}
	defer d.lock(namespace, name)()
	return d.snapshot(namespace, name, snap)
}

func (d *Dir) snapshot(namespace, name, snap string) error {
	vdir := d.volDir(namespace, name)
	m, err := readMeta(vdir)
	if err != nil {
		return fmt.Errorf("volume %s/%s: %w", namespace, name, err)
	}
	if slices.Contains(m.Snapshots, snap) || slices.Contains(m.Received, snap) {
		return nil
	}
	if err := recoverData(vdir); err != nil {
		return err
	}
	tmp := filepath.Join(vdir, tempName("snap"))
	if err := copyTree(filepath.Join(vdir, dataSub), tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("volume %s/%s: snapshot %s: %w", namespace, name, snap, err)
	}
	if err := os.MkdirAll(filepath.Join(vdir, snapshotsSub), 0o700); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(vdir, snapshotsSub, snap)); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	m.Snapshots = append(m.Snapshots, snap)
	return writeMeta(vdir, m)
}

// Rollback implements Store. The snapshot is copied aside, then swapped
// with data/; it is dropped (with any later one) only once data/ holds it.
func (d *Dir) Rollback(ctx context.Context, namespace, name, snap string) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	if err := checkSnap("snapshot", snap); err != nil {
		return err
	}
	defer d.lock(namespace, name)()
	vdir := d.volDir(namespace, name)
	m, err := readMeta(vdir)
	if err != nil {
		return fmt.Errorf("volume %s/%s: %w", namespace, name, err)
	}
	i := slices.Index(m.Snapshots, snap)
	if i < 0 {
		if slices.Contains(m.Received, snap) {
			return fmt.Errorf("volume %s/%s: snapshot %s came with a received stream and a directory volume keeps no copy of it: %w",
				namespace, name, snap, ErrNoSnapshot)
		}
		return fmt.Errorf("volume %s/%s: snapshot %s: %w", namespace, name, snap, ErrNoSnapshot)
	}
	if err := recoverData(vdir); err != nil {
		return err
	}
	tmp := filepath.Join(vdir, tempName("rollback"))
	if err := copyTree(filepath.Join(vdir, snapshotsSub, snap), tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("volume %s/%s: roll back to %s: %w", namespace, name, snap, err)
	}
	data, old := filepath.Join(vdir, dataSub), filepath.Join(vdir, tmpPrefix+"data-old")
	if err := os.Rename(data, old); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, data); err != nil {
		_ = os.Rename(old, data)
		_ = os.RemoveAll(tmp)
		return err
	}
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	return d.dropSnaps(vdir, m, m.Snapshots[i:])
}

// dropSnaps removes snapshots from meta first, then their copies, so a
// crash leaves at worst an unlisted copy, never a listed missing one.
func (d *Dir) dropSnaps(vdir string, m dirMeta, drop []string) error {
	drop = slices.Clone(drop)
	if len(drop) == 0 {
		return nil
	}
	m.Snapshots = slices.DeleteFunc(m.Snapshots, func(s string) bool { return slices.Contains(drop, s) })
	m.Received = slices.DeleteFunc(m.Received, func(s string) bool { return slices.Contains(drop, s) })
	m.Manifests = slices.DeleteFunc(m.Manifests, func(s string) bool { return slices.Contains(drop, s) })
	if err := writeMeta(vdir, m); err != nil {
		return err
	}
	for _, s := range drop {
		if err := os.RemoveAll(filepath.Join(vdir, snapshotsSub, s)); err != nil {
			return err
		}
		if err := os.Remove(manifestPath(vdir, s)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// DropSnapshots implements Store.
func (d *Dir) DropSnapshots(ctx context.Context, namespace, name, prefix, keep string) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	defer d.lock(namespace, name)()
	vdir := d.volDir(namespace, name)
	m, err := readMeta(vdir)
	if errors.Is(err, ErrNoVolume) {
		return nil
	}
	if err != nil {
		return err
	}
	var drop []string
	for _, s := range slices.Concat(m.Received, m.Snapshots, m.Manifests) {
		if strings.HasPrefix(s, prefix) && s != keep {
			drop = append(drop, s)
		}
	}
	return d.dropSnaps(vdir, m, drop)
}

// Destroy implements Store: renamed aside first, so a crash midway leaves
// no half volume under the name.
func (d *Dir) Destroy(ctx context.Context, namespace, name string) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	defer d.lock(namespace, name)()
	return d.destroy(namespace, name)
}

func (d *Dir) destroy(namespace, name string) error {
	vdir := d.volDir(namespace, name)
	if _, err := os.Lstat(vdir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	gone := filepath.Join(d.nsDir(namespace), tempName("gone-"+name))
	if err := os.Rename(vdir, gone); err != nil {
		return fmt.Errorf("volume %s/%s: %w", namespace, name, err)
	}
	if err := os.RemoveAll(gone); err != nil {
		return fmt.Errorf("volume %s/%s: remove %s: %w", namespace, name, gone, err)
	}
	return nil
}
