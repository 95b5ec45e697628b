package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// CommitOptions describe an image built on this host.
type CommitOptions struct {
	// Base is the image the root was made from (PrepareRoot), or "" for
	// an image from scratch.
	Base string
	// Platform of a scratch image; a based one keeps its base's.
	Platform Platform
	// Configure changes the config (Cmd, Env, ...); unknown keys stay.
	Configure func(*Config)
	// CreatedBy is the history entry of the new layer.
	CreatedBy string
	Now       time.Time
}

// Commit takes a root built on this host (a copy of Base's top layer,
// changed) as a new layer on Base and records the image as ref: the
// layer's blob, the config and the manifest are written to the kept
// blobs, so the image is pushed and exported as built. It needs
// Options.KeepBlobs and Base's blobs kept.
func (m *Images) Commit(ctx context.Context, ref, root string, o CommitOptions) (*Record, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	if !m.o.KeepBlobs {
		return nil, fmt.Errorf("commit %s: the store keeps no blobs (Options.KeepBlobs)", r)
	}
	work, err := os.MkdirTemp(filepath.Join(m.dir, "tmp"), "commit-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)

	// What the new layer is a change from, and the image it goes on.
	lower := filepath.Join(work, "scratch")
	var (
		cfgRaw   []byte
		baseMan  *v1.Manifest
		layerMT  = types.OCILayer
		manifest = v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Config: v1.Descriptor{MediaType: types.OCIConfigJSON}}
	)
	if o.Base != "" {
		base, err := m.Get(o.Base)
		if err != nil {
			return nil, err
		}
		img, ok := m.keptImage(base)
		if !ok {
			return nil, fmt.Errorf("commit %s: the blobs of base %s are not kept", r, base.Reference)
		}
		if baseMan, err = img.Manifest(); err != nil {
			return nil, err
		}
		lp, ok := m.o.Store.(layerPather)
		if !ok {
			return nil, fmt.Errorf("commit %s: the store cannot show its layers' files", r)
		}
		if lower, err = lp.LayerPath(ctx, base.TopChainID()); err != nil {
			return nil, err
		}
		cfgRaw = base.Config
		manifest.MediaType, manifest.Config.MediaType = baseMan.MediaType, baseMan.Config.MediaType
		manifest.Layers = append(manifest.Layers, baseMan.Layers...)
		if baseMan.MediaType == types.DockerManifestSchema2 {
			layerMT = types.DockerLayer
		}
	} else {
		if o.Platform.OS == "" || o.Platform.Arch == "" {
			return nil, fmt.Errorf("commit %s: a scratch image needs a platform", r)
		}
		if err := os.Mkdir(lower, 0o755); err != nil {
			return nil, err
		}
		cfgRaw, _ = json.Marshal(Config{OS: o.Platform.OS, Architecture: o.Platform.Arch, Variant: o.Platform.Variant, RootFS: RootFS{Type: "layers", DiffIDs: []string{}}})
	}

	// The layer: the change, as a tar, then gzipped into a kept blob.
	tarPath := filepath.Join(work, "layer.tar")
	tf, err := os.Create(tarPath)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	if err := Diff(ctx, lower, root, io.MultiWriter(tf, h)); err != nil {
		tf.Close()
		return nil, fmt.Errorf("commit %s: %w", r, err)
	}
	if err := tf.Close(); err != nil {
		return nil, err
	}
	diffID := "sha256:" + hex.EncodeToString(h.Sum(nil))
	layer, err := tarball.LayerFromFile(tarPath, tarball.WithMediaType(layerMT))
	if err != nil {
		return nil, err
	}
	ld, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	size, err := layer.Size()
	if err != nil {
		return nil, err
	}
	if err := m.keepLayerBlob(layer, ld.String(), work); err != nil {
		return nil, err
	}
	manifest.Layers = append(manifest.Layers, v1.Descriptor{MediaType: layerMT, Size: size, Digest: ld})

	// The config: the base's with the layer and the caller's changes.
	cfg, err := ParseConfig(cfgRaw)
	if err != nil {
		return nil, err
	}
	cfg.RootFS.Type = "layers"
	cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, diffID)
	if o.Configure != nil {
		o.Configure(cfg)
	}
	cfgOut, err := withHistory(cfg, o.Now, o.CreatedBy)
	if err != nil {
		return nil, err
	}
	cfgSum := sha256.Sum256(cfgOut)
	manifest.Config.Digest = v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(cfgSum[:])}
	manifest.Config.Size = int64(len(cfgOut))
	if err := m.keepBytes(manifest.Config.Digest.String(), cfgOut); err != nil {
		return nil, err
	}
	manRaw, err := json.Marshal(manifest)
	if err != nil {
		return nil, err
	}
	manSum := sha256.Sum256(manRaw)
	manDigest := "sha256:" + hex.EncodeToString(manSum[:])
	if err := m.keepBytes(manDigest, manRaw); err != nil {
		return nil, err
	}
	img, ok := m.keptManifest(manDigest)
	if !ok {
		return nil, fmt.Errorf("commit %s: blobs written but not readable", r)
	}
	// The usual path from here: every blob checked, the new layer
	// extracted into the store, the image recorded.
	return m.store(ctx, r, manDigest, img, Platform{}, true, true, PullOptions{Now: o.Now})
}

// keepLayerBlob writes a layer's compressed bytes into the kept blobs,
// checked against its digest.
func (m *Images) keepLayerBlob(l v1.Layer, digest, work string) error {
	if m.hasBlob(digest) {
		return nil
	}
	rc, err := l.Compressed()
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.CreateTemp(work, "blob-")
	if err != nil {
		return err
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, h), rc); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if got := "sha256:" + hex.EncodeToString(h.Sum(nil)); got != digest {
		return fmt.Errorf("layer blob %s: wrote %s: %w", digest, got, ErrDigest)
	}
	return m.keepFile(f.Name(), digest)
}

// withHistory marshals a config with one more history entry.
func withHistory(cfg *Config, now time.Time, createdBy string) ([]byte, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var hist []json.RawMessage
	if raw, ok := m["history"]; ok {
		if err := json.Unmarshal(raw, &hist); err != nil {
			return nil, fmt.Errorf("config history: %w", err)
		}
	}
	entry, _ := json.Marshal(map[string]string{"created": now.UTC().Format(time.RFC3339), "created_by": createdBy})
	hist = append(hist, entry)
	m["history"], _ = json.Marshal(hist)
	return json.Marshal(m)
}
