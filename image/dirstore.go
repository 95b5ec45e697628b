package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrLayerInUse: the layer cannot go while something depends on it.
var ErrLayerInUse = errors.New("layer in use")

// DirStore keeps each layer as a full tree in <dir>/layers/<chain id hex>,
// for hosts without ZFS, build hosts and the process runtime: the files a
// layer does not replace are hard links to its parent's (those without
// file flags), so a layer costs the time and disk of what it adds.
//
// A container root is <dir>/roots/<id>. On Linux as root it is an
// overlay mount of its layer, with the container's writes kept in
// <dir>/roots/.rw/<id>: made in the time of a few system calls whatever
// the image's size, as a ZFS clone is. Elsewhere, or where the kernel
// refuses the mount (no overlayfs, or the store itself on an overlay), it
// is a full copy of the layer. A root removed with RemoveRoot is
// unmounted; one left behind stays mounted, for the containers using it.
type DirStore struct {
	dir   string
	owner bool
	// flags clears file flags (schg) before removing a copy and sets them
	// on copies; nil off FreeBSD.
	flags FileFlags

	// layered says whether new roots are overlay mounts; probed once, at
	// the first root (copyRoots set by tests skips the probe).
	probe     sync.Once
	layered   bool
	copyRoots bool
}

// NewDirStore returns a store under dir, creating its directories. On
// FreeBSD it changes file flags with chflags(1) on the host.
func NewDirStore(dir string) (*DirStore, error) {
	for _, d := range []string{"layers", "roots"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("directory store: %w", err)
		}
	}
	s := &DirStore{dir: dir, owner: os.Geteuid() == 0, flags: defaultFileFlags()}
	s.remountAll()
	return s, nil
}

// remountAll mounts again the overlay roots a host restart unmounted, as
// ZFS mounts its clones at boot: a container an agent adopts and starts
// again finds its root. One that fails stays unmounted, and PrepareRoot
// says why.
func (s *DirStore) remountAll() {
	ents, err := os.ReadDir(filepath.Join(s.dir, "roots", ".rw"))
	if err != nil {
		return
	}
	for _, e := range ents {
		s.remount(e.Name())
	}
}

// WithFlags sets how the store changes file flags (tests inject a fake
// runner; nil turns it off).
func (s *DirStore) WithFlags(f FileFlags) *DirStore { s.flags = f; return s }

// removeAll removes a copy, clearing the flags that would refuse it.
func (s *DirStore) removeAll(ctx context.Context, p string) error {
	if s.flags != nil {
		if _, err := os.Lstat(p); err == nil {
			if err := s.flags.Clear(ctx, p, true); err != nil {
				return fmt.Errorf("clear file flags of %s: %w", p, err)
			}
		}
	}
	return os.RemoveAll(p)
}

// copy copies a tree, setting file flags the source carries; with link,
// files without flags are hard linked rather than copied (copyTree).
func (s *DirStore) copy(ctx context.Context, src, dst string, link bool) error {
	var set func(string, uint32) error
	if s.flags != nil {
		set = func(p string, fl uint32) error { return s.flags.Set(ctx, p, fmt.Sprintf("%o", fl)) }
	}
	return copyTree(src, dst, s.owner, set, link)
}

func (s *DirStore) layerDir(chainID string) string {
	return filepath.Join(s.dir, "layers", hexOf(chainID))
}

// LayerDir is where a complete layer's files are.
func (s *DirStore) LayerDir(chainID string) string { return s.layerDir(chainID) }

func (s *DirStore) HasLayer(_ context.Context, chainID string) (bool, error) {
	if err := checkDigest(chainID); err != nil {
		return false, err
	}
	fi, err := os.Lstat(s.layerDir(chainID))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return fi.IsDir(), nil
}

type dirPending struct {
	s       *DirStore
	tmp     string
	chainID string
}

func (p *dirPending) Dir() string { return p.tmp }

// Commit renames the finished copy into place; another process that
// finished the same layer first wins, and this copy goes.
func (p *dirPending) Commit(ctx context.Context) error {
	err := os.Rename(p.tmp, p.s.layerDir(p.chainID))
	if err != nil {
		if ok, _ := p.s.HasLayer(ctx, p.chainID); ok {
			return p.s.removeAll(ctx, p.tmp)
		}
		return fmt.Errorf("commit layer %s: %w", p.chainID, err)
	}
	return nil
}

func (p *dirPending) Abort(ctx context.Context) error { return p.s.removeAll(ctx, p.tmp) }

func (s *DirStore) BeginLayer(ctx context.Context, chainID, parent string) (PendingLayer, error) {
	if err := checkDigest(chainID); err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "layers"), ".tmp-"+hexOf(chainID)[:12]+"-")
	if err != nil {
		return nil, err
	}
	// MkdirTemp makes 0700; a root directory is 0755 unless a layer's
	// "./" entry says otherwise, or users other than root could not
	// reach anything in it.
	if err := os.Chmod(tmp, 0o755); err != nil {
		s.removeAll(ctx, tmp)
		return nil, err
	}
	if parent != "" {
		// The layer's own files replace its parent's, never change them
		// in place, so the parent's files are hard linked, not copied.
		if err := s.copy(ctx, s.layerDir(parent), tmp, true); err != nil {
			s.removeAll(ctx, tmp)
			return nil, fmt.Errorf("copy parent layer %s: %w", parent, err)
		}
		if fi, err := os.Stat(s.layerDir(parent)); err == nil {
			os.Chmod(tmp, fi.Mode().Perm())
		}
	}
	return &dirPending{s: s, tmp: tmp, chainID: chainID}, nil
}

func (s *DirStore) Layers(context.Context) ([]StoredLayer, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "layers"))
	if err != nil {
		return nil, err
	}
	var out []StoredLayer
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		out = append(out, StoredLayer{ChainID: "sha256:" + e.Name()})
	}
	return out, nil
}

// RemoveLayer deletes a layer's tree; an overlay root made from it
// answers ErrLayerInUse (a copy depends on nothing).
func (s *DirStore) RemoveLayer(ctx context.Context, chainID string) error {
	if err := checkDigest(chainID); err != nil {
		return err
	}
	roots, err := s.Roots(ctx)
	if err != nil {
		return err
	}
	for _, r := range roots {
		if r.ChainID != chainID {
			continue
		}
		if _, err := os.Lstat(s.rwDir(r.ID)); err == nil {
			return fmt.Errorf("%w: the root of container %s lies over it", ErrLayerInUse, r.ID)
		}
	}
	return s.removeAll(ctx, s.layerDir(chainID))
}

func checkRootID(id string) error {
	if id == "" || strings.ContainsAny(id, "/@ \t\n") || id == "." || id == ".." || strings.HasPrefix(id, ".") {
		return fmt.Errorf("container root id %q: want a plain name", id)
	}
	return nil
}

func (s *DirStore) rootDir(id string) string { return filepath.Join(s.dir, "roots", id) }

// rwDir holds an overlay root's writes (upper) and overlayfs's scratch
// directory (work); root ids never start with a dot, so ".rw" is no id.
func (s *DirStore) rwDir(id string) string { return filepath.Join(s.dir, "roots", ".rw", id) }

func (s *DirStore) PrepareRoot(ctx context.Context, id, chainID string) (string, error) {
	if err := checkRootID(id); err != nil {
		return "", err
	}
	dir := s.rootDir(id)
	if _, err := os.Lstat(dir); err == nil {
		return dir, s.remount(id)
	}
	if s.overlays() {
		return dir, s.prepareLayered(ctx, id, chainID)
	}
	return dir, s.prepareCopy(ctx, id, chainID)
}

// overlays reports whether roots are overlay mounts here: the kernel is
// asked once, with a mount of empty directories.
func (s *DirStore) overlays() bool {
	s.probe.Do(func() {
		if s.copyRoots || !s.owner {
			return
		}
		s.sweepProbes()
		tmp, err := os.MkdirTemp(filepath.Join(s.dir, "roots"), ".tmp-probe-")
		if err != nil {
			return
		}
		defer os.RemoveAll(tmp)
		for _, d := range []string{"lower", "upper", "work", "root"} {
			if os.Mkdir(filepath.Join(tmp, d), 0o700) != nil {
				return
			}
		}
		root := filepath.Join(tmp, "root")
		if mountOverlay(filepath.Join(tmp, "lower"), filepath.Join(tmp, "upper"), filepath.Join(tmp, "work"), root) != nil {
			return
		}
		s.layered = unmountOverlay(root) == nil
	})
	return s.layered
}

// sweepProbes removes the probes of processes before this one: one
// killed between the probe's mount and its unmount left it mounted, and
// a mounted directory outlives CleanStale (its removal fails). One
// process at a time owns the store (the daemon's data directory lock),
// so none of them is in use.
func (s *DirStore) sweepProbes() {
	old, _ := filepath.Glob(filepath.Join(s.dir, "roots", ".tmp-probe-*"))
	for _, p := range old {
		if unmountOverlay(filepath.Join(p, "root")) == nil {
			os.RemoveAll(p)
		}
	}
}

// remount mounts again an overlay root found unmounted (the host
// restarted) on the layer it records; a copied root is as it was left,
// and a writable part without a record or mount point is no root yet.
func (s *DirStore) remount(id string) error {
	rw, dir := s.rwDir(id), s.rootDir(id)
	if _, err := os.Lstat(rw); err != nil {
		return nil
	}
	if on, err := mountedOver(dir); err != nil || on {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	b, err := os.ReadFile(dir + ".layer")
	if err != nil {
		return fmt.Errorf("container %s: its root's layer: %w", id, err)
	}
	chainID := strings.TrimSpace(string(b))
	if err := mountOverlay(s.layerDir(chainID), filepath.Join(rw, "upper"), filepath.Join(rw, "work"), dir); err != nil {
		return fmt.Errorf("container %s: mount its root again: %w", id, err)
	}
	return nil
}

// prepareLayered makes the root an overlay of its layer. The writable
// part is made aside and renamed into place, and the layer recorded,
// before the mount point exists: a root seen is complete or none.
func (s *DirStore) prepareLayered(ctx context.Context, id, chainID string) error {
	layer := s.layerDir(chainID)
	fi, err := os.Stat(layer)
	if err != nil {
		return fmt.Errorf("container %s: layer %s: %w", id, chainID, err)
	}
	if err := os.MkdirAll(filepath.Join(s.dir, "roots", ".rw"), 0o700); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "roots"), ".tmp-")
	if err != nil {
		return err
	}
	upper := filepath.Join(tmp, "upper")
	err = errors.Join(os.Mkdir(upper, 0o700), os.Mkdir(filepath.Join(tmp, "work"), 0o700))
	// The root directory's owner and mode are the upper one's.
	if err == nil {
		err = os.Chmod(upper, fi.Mode().Perm())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && err == nil {
		err = os.Lchown(upper, int(st.Uid), int(st.Gid))
	}
	if err != nil {
		s.removeAll(ctx, tmp)
		return fmt.Errorf("container %s: root: %w", id, err)
	}
	rw, dir := s.rwDir(id), s.rootDir(id)
	// A writable part without its mount point is what an interrupted
	// PrepareRoot left: no container ever ran on it.
	if _, err := os.Lstat(rw); err == nil {
		if err := s.removeAll(ctx, rw); err != nil {
			s.removeAll(ctx, tmp)
			return fmt.Errorf("container %s: a root left half made: %w", id, err)
		}
	}
	undo := func() {
		os.Remove(dir)
		os.Remove(dir + ".layer")
		s.removeAll(ctx, rw)
	}
	if err := os.Rename(tmp, rw); err != nil {
		s.removeAll(ctx, tmp)
		return err
	}
	if err := os.WriteFile(dir+".layer", []byte(chainID+"\n"), 0o600); err != nil {
		undo()
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		undo()
		return err
	}
	if err := mountOverlay(layer, filepath.Join(rw, "upper"), filepath.Join(rw, "work"), dir); err != nil {
		undo()
		return fmt.Errorf("container %s: mount its root: %w", id, err)
	}
	return nil
}

// prepareCopy makes the root a full copy of its layer.
func (s *DirStore) prepareCopy(ctx context.Context, id, chainID string) error {
	dir := s.rootDir(id)
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "roots"), ".tmp-")
	if err != nil {
		return err
	}
	// A container writes into its root: a copy of its own.
	if err := s.copy(ctx, s.layerDir(chainID), tmp, false); err != nil {
		s.removeAll(ctx, tmp)
		return fmt.Errorf("container %s: copy layer %s: %w", id, chainID, err)
	}
	// The root keeps its image's mode, not MkdirTemp's 0700.
	if fi, err := os.Stat(s.layerDir(chainID)); err == nil {
		if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil {
			s.removeAll(ctx, tmp)
			return err
		}
	}
	if err := os.WriteFile(dir+".layer", []byte(chainID+"\n"), 0o600); err != nil {
		s.removeAll(ctx, tmp)
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		s.removeAll(ctx, tmp)
		return err
	}
	return nil
}

// RemoveRoot unmounts (an overlay root) and removes a container's root.
func (s *DirStore) RemoveRoot(ctx context.Context, id string) error {
	if err := checkRootID(id); err != nil {
		return err
	}
	dir, rw := s.rootDir(id), s.rwDir(id)
	if _, err := os.Lstat(rw); err == nil {
		if err := unmountOverlay(dir); err != nil {
			return fmt.Errorf("container %s: unmount its root: %w", id, err)
		}
		// Removed only once unmounted: below the mount point is an empty
		// directory.
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("container %s: root: %w", id, err)
		}
		if err := s.removeAll(ctx, rw); err != nil {
			return err
		}
	} else if err := s.removeAll(ctx, dir); err != nil {
		return err
	}
	if err := os.Remove(dir + ".layer"); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (s *DirStore) Roots(context.Context) ([]Root, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "roots"))
	if err != nil {
		return nil, err
	}
	var out []Root
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".layer")
		if !ok || strings.HasPrefix(id, ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, "roots", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Root{ID: id, ChainID: strings.TrimSpace(string(b)), Dir: filepath.Join(s.dir, "roots", id)})
	}
	return out, nil
}

// CleanStale removes what interrupted writers left (.tmp-* copies, an
// overlay root's writable part with no root recorded) and was last
// changed before a time; younger ones may still be in use.
func (s *DirStore) CleanStale(ctx context.Context, before time.Time) ([]string, error) {
	var removed []string
	for _, sub := range []string{"layers", "roots"} {
		dir := filepath.Join(s.dir, sub)
		ents, err := os.ReadDir(dir)
		if err != nil {
			return removed, err
		}
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".tmp-") {
				continue
			}
			fi, err := e.Info()
			if err != nil || !fi.ModTime().Before(before) {
				continue
			}
			p := filepath.Join(dir, e.Name())
			if err := s.removeAll(ctx, p); err != nil {
				return removed, err
			}
			removed = append(removed, p)
		}
	}
	// An overlay root's writable part whose root was never recorded (its
	// maker stopped between the two).
	rws, err := os.ReadDir(filepath.Join(s.dir, "roots", ".rw"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return removed, err
	}
	for _, e := range rws {
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(before) {
			continue
		}
		if _, err := os.Lstat(s.rootDir(e.Name()) + ".layer"); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		p := filepath.Join(s.dir, "roots", ".rw", e.Name())
		if err := s.removeAll(ctx, p); err != nil {
			return removed, err
		}
		removed = append(removed, p)
	}
	return removed, nil
}
