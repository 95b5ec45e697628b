package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrLayerInUse: the layer cannot go while something depends on it.
var ErrLayerInUse = errors.New("layer in use")

// DirStore keeps each layer as a full tree in <dir>/layers/<chain id hex>,
// for hosts without ZFS, build hosts and the process runtime: the files a
// layer does not replace are hard links to its parent's (those without
// file flags), so a layer costs the time and disk of what it adds. A
// container root is a full copy in <dir>/roots/<id>.
type DirStore struct {
	dir   string
	owner bool
	// flags clears file flags (schg) before removing a copy and sets them
	// on copies; nil off FreeBSD.
	flags FileFlags
}

// NewDirStore returns a store under dir, creating its directories. On
// FreeBSD it changes file flags with chflags(1) on the host.
func NewDirStore(dir string) (*DirStore, error) {
	for _, d := range []string{"layers", "roots"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("directory store: %w", err)
		}
	}
	return &DirStore{dir: dir, owner: os.Geteuid() == 0, flags: defaultFileFlags()}, nil
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

// RemoveLayer deletes a layer's copy; nothing depends on a full copy.
func (s *DirStore) RemoveLayer(ctx context.Context, chainID string) error {
	if err := checkDigest(chainID); err != nil {
		return err
	}
	return s.removeAll(ctx, s.layerDir(chainID))
}

func checkRootID(id string) error {
	if id == "" || strings.ContainsAny(id, "/@ \t\n") || id == "." || id == ".." || strings.HasPrefix(id, ".") {
		return fmt.Errorf("container root id %q: want a plain name", id)
	}
	return nil
}

func (s *DirStore) PrepareRoot(ctx context.Context, id, chainID string) (string, error) {
	if err := checkRootID(id); err != nil {
		return "", err
	}
	dir := filepath.Join(s.dir, "roots", id)
	if _, err := os.Lstat(dir); err == nil {
		return dir, nil
	}
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "roots"), ".tmp-")
	if err != nil {
		return "", err
	}
	// A container writes into its root: a copy of its own.
	if err := s.copy(ctx, s.layerDir(chainID), tmp, false); err != nil {
		s.removeAll(ctx, tmp)
		return "", fmt.Errorf("container %s: copy layer %s: %w", id, chainID, err)
	}
	// The root keeps its image's mode, not MkdirTemp's 0700.
	if fi, err := os.Stat(s.layerDir(chainID)); err == nil {
		if err := os.Chmod(tmp, fi.Mode().Perm()); err != nil {
			s.removeAll(ctx, tmp)
			return "", err
		}
	}
	if err := os.WriteFile(dir+".layer", []byte(chainID+"\n"), 0o600); err != nil {
		s.removeAll(ctx, tmp)
		return "", err
	}
	if err := os.Rename(tmp, dir); err != nil {
		s.removeAll(ctx, tmp)
		return "", err
	}
	return dir, nil
}

func (s *DirStore) RemoveRoot(ctx context.Context, id string) error {
	if err := checkRootID(id); err != nil {
		return err
	}
	dir := filepath.Join(s.dir, "roots", id)
	if err := s.removeAll(ctx, dir); err != nil {
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

// CleanStale removes what interrupted writers left (.tmp-* copies) and
// was last changed before a time; younger ones may still be in use.
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
	return removed, nil
}
