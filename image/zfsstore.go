package image

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/legionbsd/legion/zfs"
)

// ZFSStore keeps each layer as a dataset <root>/images/<chain id hex>,
// cloned from the layer below and snapshotted @layer once complete, so
// images share their common layers; a container root is a clone
// <root>/containers/<id> of its image's top layer.
type ZFSStore struct {
	z    *zfs.ZFS
	root string
}

// NewZFSStore returns a store under the dataset root (e.g. zroot/legion).
func NewZFSStore(z *zfs.ZFS, root string) *ZFSStore {
	return &ZFSStore{z: z, root: strings.TrimSuffix(root, "/")}
}

const layerSnap = "@layer"

func (s *ZFSStore) images() string     { return s.root + "/images" }
func (s *ZFSStore) containers() string { return s.root + "/containers" }
func (s *ZFSStore) dataset(chainID string) string {
	return s.images() + "/" + hexOf(chainID)
}

// HasLayer: a layer is complete once its @layer snapshot exists; a dataset
// without one is what an interrupted pull left.
func (s *ZFSStore) HasLayer(ctx context.Context, chainID string) (bool, error) {
	if err := checkDigest(chainID); err != nil {
		return false, err
	}
	return s.z.Exists(ctx, s.dataset(chainID)+layerSnap)
}

type zfsPending struct {
	s       *ZFSStore
	ds, dir string
}

func (p *zfsPending) Dir() string { return p.dir }

func (p *zfsPending) Commit(ctx context.Context) error {
	return p.s.z.Snapshot(ctx, p.ds+layerSnap)
}

func (p *zfsPending) Abort(ctx context.Context) error {
	return p.s.z.Destroy(ctx, p.ds, true)
}

// BeginLayer destroys what an interrupted pull may have left of the layer,
// then creates it (a base layer) or clones it from its parent's snapshot.
func (s *ZFSStore) BeginLayer(ctx context.Context, chainID, parent string) (PendingLayer, error) {
	if err := checkDigest(chainID); err != nil {
		return nil, err
	}
	ds := s.dataset(chainID)
	if err := s.z.Destroy(ctx, ds, true); err != nil {
		return nil, err
	}
	if err := s.z.Create(ctx, s.images(), nil); err != nil {
		return nil, err
	}
	if parent == "" {
		if err := s.z.Create(ctx, ds, nil); err != nil {
			return nil, err
		}
	} else if err := s.z.Clone(ctx, s.dataset(parent)+layerSnap, ds, nil); err != nil {
		return nil, err
	}
	dir, err := s.z.Mountpoint(ctx, ds)
	if err != nil {
		s.z.Destroy(ctx, ds, true)
		return nil, err
	}
	return &zfsPending{s: s, ds: ds, dir: dir}, nil
}

// Layers lists the layer datasets with their parents, read from the
// clones' origins.
func (s *ZFSStore) Layers(ctx context.Context) ([]StoredLayer, error) {
	ds, err := s.z.Children(ctx, s.images())
	if err != nil {
		return nil, err
	}
	var out []StoredLayer
	for _, d := range ds {
		l := StoredLayer{ChainID: "sha256:" + path.Base(d.Name)}
		if o, ok := strings.CutSuffix(d.Origin, layerSnap); ok && strings.HasPrefix(o, s.images()+"/") {
			l.Parent = "sha256:" + path.Base(o)
		}
		if checkDigest(l.ChainID) != nil {
			continue // not one of ours
		}
		out = append(out, l)
	}
	return out, nil
}

// RemoveLayer destroys the dataset and its snapshot; a snapshot with
// clones (a layer above, or a container) answers ErrLayerInUse.
func (s *ZFSStore) RemoveLayer(ctx context.Context, chainID string) error {
	if err := checkDigest(chainID); err != nil {
		return err
	}
	err := s.z.Destroy(ctx, s.dataset(chainID), true)
	if errors.Is(err, zfs.ErrHasClones) || errors.Is(err, zfs.ErrBusy) {
		return errors.Join(ErrLayerInUse, err)
	}
	return err
}

// PrepareRoot clones the layer's snapshot for a container; an existing
// clone of that name is the container's root already (a restarted agent
// adopting it).
func (s *ZFSStore) PrepareRoot(ctx context.Context, id, chainID string) (string, error) {
	if err := checkRootID(id); err != nil {
		return "", err
	}
	if err := s.z.Create(ctx, s.containers(), nil); err != nil {
		return "", err
	}
	ds := s.containers() + "/" + id
	err := s.z.Clone(ctx, s.dataset(chainID)+layerSnap, ds, nil)
	if err != nil && !errors.Is(err, zfs.ErrExists) {
		return "", fmt.Errorf("container %s: %w", id, err)
	}
	return s.z.Mountpoint(ctx, ds)
}

func (s *ZFSStore) RemoveRoot(ctx context.Context, id string) error {
	if err := checkRootID(id); err != nil {
		return err
	}
	return s.z.Destroy(ctx, s.containers()+"/"+id, true)
}

func (s *ZFSStore) Roots(ctx context.Context) ([]Root, error) {
	ds, err := s.z.Children(ctx, s.containers())
	if err != nil {
		return nil, err
	}
	var out []Root
	for _, d := range ds {
		r := Root{ID: path.Base(d.Name), Dir: d.Mountpoint}
		if o, ok := strings.CutSuffix(d.Origin, layerSnap); ok {
			r.ChainID = "sha256:" + path.Base(o)
		}
		out = append(out, r)
	}
	return out, nil
}

// ensure the interface is met by both stores.
var (
	_ Store = (*ZFSStore)(nil)
	_ Store = (*DirStore)(nil)
)
