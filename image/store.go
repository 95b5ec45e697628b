package image

import "context"

// Store keeps layers by chain id and makes container roots from them.
// DirStore keeps full copies in directories; ZFSStore keeps datasets
// cloned from the layer below.
type Store interface {
	// HasLayer reports whether a complete layer is stored.
	HasLayer(ctx context.Context, chainID string) (bool, error)
	// BeginLayer prepares a writable directory holding the parent layer's
	// files ("" for a base layer), for a layer to be applied onto. The
	// files may be the parent's own (DirStore hard links them): a writer
	// replaces a file, removing it and making it again, and never writes
	// into it or changes its owner, mode or times; extraction does so.
	BeginLayer(ctx context.Context, chainID, parent string) (PendingLayer, error)
	// Layers lists the complete layers, with their parents where the
	// store depends on them (ZFS clones).
	Layers(ctx context.Context) ([]StoredLayer, error)
	// RemoveLayer destroys a layer. A layer something depends on (a clone)
	// answers ErrLayerInUse.
	RemoveLayer(ctx context.Context, chainID string) error
	// PrepareRoot makes a container's root file system from a layer and
	// returns its directory; calling it again for the same id returns the
	// existing root.
	PrepareRoot(ctx context.Context, id, chainID string) (string, error)
	// RemoveRoot removes a container's root; a missing one is gone already.
	RemoveRoot(ctx context.Context, id string) error
	// Roots lists container roots and the layer each was made from.
	Roots(ctx context.Context) ([]Root, error)
}

// PendingLayer is a layer being written.
type PendingLayer interface {
	Dir() string
	// Commit makes the layer complete and visible to HasLayer.
	Commit(ctx context.Context) error
	// Abort discards it.
	Abort(ctx context.Context) error
}

// StoredLayer is one complete layer.
type StoredLayer struct {
	ChainID string
	Parent  string // "" for a base layer, or when the store keeps full copies
}

// Root is a container's root file system.
type Root struct {
	ID      string
	ChainID string
	Dir     string
}
