package image

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// With Options.KeepBlobs (build hosts), the blobs a pull verified are kept
// as they came, under <data-dir>/images/blobs/blobs/sha256 (the blob
// directory of an OCI layout), so an image
// is pushed or exported with its own manifest and layers rather than
// packed again.

func (m *Images) blobRoot() string { return filepath.Join(m.dir, "blobs") }

func (m *Images) blobPath(digest string) string {
	return filepath.Join(m.blobRoot(), "blobs", "sha256", hexOf(digest))
}

func (m *Images) hasBlob(digest string) bool {
	fi, err := os.Stat(m.blobPath(digest))
	return err == nil && fi.Mode().IsRegular()
}

// keepFile moves a verified temporary file into the blob store.
func (m *Images) keepFile(tmp, digest string) error {
	if err := os.MkdirAll(filepath.Dir(m.blobPath(digest)), 0o700); err != nil {
		return err
	}
	return os.Rename(tmp, m.blobPath(digest))
}

// keepBytes writes a small blob (a manifest, a config) atomically.
func (m *Images) keepBytes(digest string, b []byte) error {
	if m.hasBlob(digest) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(m.blobPath(digest)), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(m.blobPath(digest)), ".new-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), m.blobPath(digest))
}

// keptImage is a record's image from kept blobs, when all of them are.
func (m *Images) keptImage(rec *Record) (v1.Image, bool) {
	if !m.o.KeepBlobs || rec.Manifest == "" || !m.hasBlob(rec.Manifest) || !m.hasBlob(rec.ConfigDigest) {
		return nil, false
	}
	for _, l := range rec.Layers {
		if !m.hasBlob(l.Digest) {
			return nil, false
		}
	}
	return m.keptManifest(rec.Manifest)
}

// keptManifest is the image a kept manifest names, when all its blobs are
// kept.
func (m *Images) keptManifest(digest string) (v1.Image, bool) {
	raw, err := os.ReadFile(m.blobPath(digest))
	if err != nil {
		return nil, false
	}
	man, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil || !m.hasBlob(man.Config.Digest.String()) {
		return nil, false
	}
	for _, l := range man.Layers {
		if !m.hasBlob(l.Digest.String()) {
			return nil, false
		}
	}
	img, err := partial.CompressedToImage(&keptImage{m: m, raw: raw, man: man})
	if err != nil {
		return nil, false
	}
	return img, true
}

// keptImage reads an image's manifest, config and layers from kept blobs.
type keptImage struct {
	m   *Images
	raw []byte
	man *v1.Manifest
}

func (k *keptImage) MediaType() (types.MediaType, error) {
	if k.man.MediaType != "" {
		return k.man.MediaType, nil
	}
	return types.OCIManifestSchema1, nil
}

func (k *keptImage) RawManifest() ([]byte, error) { return k.raw, nil }

func (k *keptImage) RawConfigFile() ([]byte, error) {
	return os.ReadFile(k.m.blobPath(k.man.Config.Digest.String()))
}

func (k *keptImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, d := range k.man.Layers {
		if d.Digest == h {
			return &keptBlob{path: k.m.blobPath(h.String()), desc: d}, nil
		}
	}
	if h == k.man.Config.Digest {
		return &keptBlob{path: k.m.blobPath(h.String()), desc: k.man.Config}, nil
	}
	return nil, fmt.Errorf("kept image: no blob %s", h)
}

// keptBlob is a blob file described by its manifest entry.
type keptBlob struct {
	path string
	desc v1.Descriptor
}

func (b *keptBlob) Digest() (v1.Hash, error)            { return b.desc.Digest, nil }
func (b *keptBlob) Size() (int64, error)                { return b.desc.Size, nil }
func (b *keptBlob) MediaType() (types.MediaType, error) { return b.desc.MediaType, nil }
func (b *keptBlob) Compressed() (io.ReadCloser, error)  { return os.Open(b.path) }

// pruneBlobs removes kept blobs no record names and no pin holds.
func (m *Images) pruneBlobs(f *indexFile, pinned map[string]bool) ([]string, error) {
	dir := filepath.Join(m.blobRoot(), "blobs", "sha256")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, r := range f.Images {
		used[r.Manifest], used[r.ConfigDigest] = true, true
		for _, l := range r.Layers {
			used[l.Digest] = true
		}
	}
	var removed []string
	for _, e := range ents {
		d := "sha256:" + e.Name()
		if checkDigest(d) != nil || used[d] || pinned[d] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			return removed, err
		}
		removed = append(removed, d)
	}
	return removed, nil
}
