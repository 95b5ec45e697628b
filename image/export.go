package image

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// layerPather is a store that shows a complete layer's files.
type layerPather interface {
	LayerPath(ctx context.Context, chainID string) (string, error)
}

// LayerPath is where a complete layer's files are.
func (s *DirStore) LayerPath(ctx context.Context, chainID string) (string, error) {
	ok, err := s.HasLayer(ctx, chainID)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("layer %s: %w", chainID, ErrNotPresent)
	}
	return s.layerDir(chainID), nil
}

// LayerPath is the mountpoint of a layer's dataset.
func (s *ZFSStore) LayerPath(ctx context.Context, chainID string) (string, error) {
	if err := checkDigest(chainID); err != nil {
		return "", err
	}
	return s.z.Mountpoint(ctx, s.dataset(chainID))
}

// Export writes a stored image as an OCI archive (an OCI layout in a tar)
// that also holds Docker's manifest.json, so both `legion image load`,
// podman and docker load it. The store keeps layers unpacked, not the
// blobs they came as, so the image goes out packed again as one layer;
// its config keeps every key but rootfs and history, which describe the
// new layer.
func (m *Images) Export(ctx context.Context, ref string, w io.Writer) error {
	rec, img, work, err := m.packed(ctx, ref)
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	out := filepath.Join(work, "out")
	lay, err := layout.Write(out, empty.Index)
	if err != nil {
		return err
	}
	if err := lay.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationRefName: rec.Reference, annotationContainerdName: rec.Reference,
	})); err != nil {
		return fmt.Errorf("export %s: %w", rec.Reference, err)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	ls, err := img.Layers()
	if err != nil {
		return err
	}
	ld, err := ls[0].Digest()
	if err != nil {
		return err
	}
	dm := dockerManifest{
		Config: "blobs/sha256/" + cfgName.Hex,
		Layers: []string{"blobs/sha256/" + ld.Hex},
	}
	if r, err := ParseReference(rec.Reference); err == nil && r.Tag() != "" {
		dm.RepoTags = []string{rec.Reference}
	}
	mj, err := json.Marshal([]dockerManifest{dm})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "manifest.json"), mj, 0o644); err != nil {
		return err
	}
	return tarTree(out, w)
}

// Push sends a stored image to a registry under target (a tag), packed as
// one layer as Export does, and returns the digest it was pushed as.
func (m *Images) Push(ctx context.Context, ref, target string, login *Login) (string, error) {
	t, err := ParseReference(target)
	if err != nil {
		return "", err
	}
	if t.Local() {
		return "", fmt.Errorf("push to %s: localhost names no registry", t)
	}
	_, img, work, err := m.packed(ctx, ref)
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	if err := remote.Write(t.Name(), img, m.o.Registry.Options(ctx, login)...); err != nil {
		return "", fmt.Errorf("push %s: %w", t, classifyRemote(err))
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// packed gives a stored image to send: as it came when its blobs were
// kept, or else its top layer packed as one layer in a work directory
// (removed by the caller) with the image built around it.
func (m *Images) packed(ctx context.Context, ref string) (*Record, v1.Image, string, error) {
	rec, err := m.Get(ref)
	if err != nil {
		return nil, nil, "", err
	}
	work, err := os.MkdirTemp(filepath.Join(m.dir, "tmp"), "export-")
	if err != nil {
		return nil, nil, "", err
	}
	if img, ok := m.keptImage(rec); ok {
		return rec, img, work, nil
	}
	os.RemoveAll(work)
	lp, ok := m.o.Store.(layerPather)
	if !ok {
		return nil, nil, "", fmt.Errorf("image %s: the store cannot show its layers' files", rec.Reference)
	}
	if len(rec.Layers) == 0 {
		return nil, nil, "", fmt.Errorf("image %s has no layers", rec.Reference)
	}
	src, err := lp.LayerPath(ctx, rec.TopChainID())
	if err != nil {
		return nil, nil, "", fmt.Errorf("image %s: %w", rec.Reference, err)
	}
	work, err = os.MkdirTemp(filepath.Join(m.dir, "tmp"), "export-")
	if err != nil {
		return nil, nil, "", err
	}
	fail := func(err error) (*Record, v1.Image, string, error) {
		os.RemoveAll(work)
		return nil, nil, "", err
	}
	tarPath := filepath.Join(work, "layer.tar")
	tf, err := os.Create(tarPath)
	if err != nil {
		return fail(err)
	}
	h := sha256.New()
	if err := packDir(ctx, src, io.MultiWriter(tf, h)); err != nil {
		tf.Close()
		return fail(fmt.Errorf("image %s: pack layer: %w", rec.Reference, err))
	}
	if err := tf.Close(); err != nil {
		return fail(err)
	}
	diffID := "sha256:" + hex.EncodeToString(h.Sum(nil))
	layer, err := tarball.LayerFromFile(tarPath, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return fail(err)
	}
	cfg, err := repackedConfig(rec.Config, diffID)
	if err != nil {
		return fail(fmt.Errorf("image %s: %w", rec.Reference, err))
	}
	img, err := newPackedImage(cfg, layer)
	if err != nil {
		return fail(err)
	}
	return rec, img, work, nil
}

// repackedConfig keeps every key of a config but rootfs and history.
func repackedConfig(raw []byte, diffID string) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	rootfs, _ := json.Marshal(RootFS{Type: "layers", DiffIDs: []string{diffID}})
	m["rootfs"] = rootfs
	m["history"] = json.RawMessage(`[{"created_by":"legion: layers packed as one on export"}]`)
	return json.Marshal(m)
}

// packedImage is an image of one layer with a config given as bytes, so
// no key of it is lost on the way out.
type packedImage struct {
	cfg, manifest []byte
	layer         v1.Layer
}

func newPackedImage(cfg []byte, layer v1.Layer) (v1.Image, error) {
	ld, err := layer.Digest()
	if err != nil {
		return nil, err
	}
	size, err := layer.Size()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(cfg)
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		Config: v1.Descriptor{MediaType: types.OCIConfigJSON, Size: int64(len(cfg)),
			Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}},
		Layers: []v1.Descriptor{{MediaType: types.OCILayer, Size: size, Digest: ld}},
	}
	mb, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return partial.CompressedToImage(&packedImage{cfg: cfg, manifest: mb, layer: layer})
}

func (p *packedImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (p *packedImage) RawConfigFile() ([]byte, error)      { return p.cfg, nil }
func (p *packedImage) RawManifest() ([]byte, error)        { return p.manifest, nil }

func (p *packedImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if ld, _ := p.layer.Digest(); ld == h {
		return p.layer, nil
	}
	return nil, fmt.Errorf("packed image: no layer %s", h)
}

// tarTree writes a directory's regular files and directories as a tar.
func tarTree(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: fi.ModTime(), Typeflag: tar.TypeReg, Size: fi.Size()}
		if d.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// PushIndex pushes an index naming images already in target's repository
// (by digest), one per platform, as a multi-platform image; it returns
// the index's digest, which is what references to the image resolve to.
func (m *Images) PushIndex(ctx context.Context, target string, manifests map[Platform]string, login *Login) (string, error) {
	t, err := ParseReference(target)
	if err != nil {
		return "", err
	}
	opts := m.o.Registry.Options(ctx, login)
	plats := make([]Platform, 0, len(manifests))
	for p := range manifests {
		plats = append(plats, p)
	}
	sort.Slice(plats, func(i, j int) bool { return plats[i].String() < plats[j].String() })
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range plats {
		byDigest, err := t.WithDigest(manifests[p])
		if err != nil {
			return "", err
		}
		desc, err := remote.Get(byDigest.Name(), opts...)
		if err != nil {
			return "", fmt.Errorf("index %s: %s for %s: %w", t, manifests[p], p, classifyRemote(err))
		}
		if !desc.MediaType.IsImage() {
			return "", fmt.Errorf("index %s: %s for %s is no image manifest", t, manifests[p], p)
		}
		// The registry's own image: writing the index finds its blobs
		// there and sends nothing again.
		img, err := desc.Image()
		if err != nil {
			return "", err
		}
		d := desc.Descriptor
		d.Platform = &v1.Platform{OS: p.OS, Architecture: p.Arch, Variant: p.Variant}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: d})
	}
	if err := remote.WriteIndex(t.Name(), idx, opts...); err != nil {
		return "", fmt.Errorf("push index %s: %w", t, classifyRemote(err))
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}
