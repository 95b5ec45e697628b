package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Annotations naming an image in an OCI layout's index.
const (
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// Load adds the images of an archive to the store, as `legion image load`
// does: an OCI archive (podman save --format oci-archive, or any tool's OCI
// layout in a tar) or docker save's tar with manifest.json. Each image is
// named by ref when given, else by the archive's own name for it. Loaded
// images are anyone's and are never asked of a registry when their name is
// localhost/....
func (m *Images) Load(ctx context.Context, r io.Reader, ref string, now time.Time) ([]*Record, error) {
	work, err := os.MkdirTemp(filepath.Join(m.dir, "tmp"), "load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	archive := filepath.Join(work, "archive.tar")
	f, err := os.Create(archive)
	if err != nil {
		return nil, err
	}
	if _, err := io.Copy(f, ctxReader{ctx, r}); err != nil {
		f.Close()
		return nil, fmt.Errorf("load: read archive: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	layoutDir := filepath.Join(work, "layout")
	names, err := untarPlain(archive, layoutDir)
	if err != nil {
		return nil, fmt.Errorf("load: %w", err)
	}
	o := PullOptions{Now: now}
	switch {
	case names["index.json"] && names["oci-layout"]:
		return m.loadLayout(ctx, layoutDir, ref, o)
	case names["manifest.json"]:
		return m.loadDocker(ctx, archive, layoutDir, ref, o)
	}
	return nil, fmt.Errorf("load: the archive holds neither an OCI layout (oci-layout, index.json) nor docker's manifest.json")
}

func (m *Images) loadLayout(ctx context.Context, dir, ref string, o PullOptions) ([]*Record, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("load: OCI layout: %w", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("load: OCI layout: %w", err)
	}
	if len(im.Manifests) == 0 {
		return nil, fmt.Errorf("load: OCI layout names no image")
	}
	if ref != "" && len(im.Manifests) > 1 {
		return nil, fmt.Errorf("load: the archive holds %d images; name none of them to keep their own names", len(im.Manifests))
	}
	var out []*Record
	for i, d := range im.Manifests {
		n := ref
		if n == "" {
			n = d.Annotations[annotationContainerdName]
		}
		if n == "" {
			n = d.Annotations[annotationRefName]
		}
		if n == "" || !strings.ContainsAny(n, "/:@") {
			return nil, fmt.Errorf("load: manifests[%d] (%s) has no image name; give one", i, d.Digest)
		}
		r, err := ParseReference(n)
		if err != nil {
			return nil, fmt.Errorf("load: manifests[%d]: %w", i, err)
		}
		var (
			img  v1.Image
			plat Platform
		)
		switch {
		case d.MediaType.IsIndex():
			sub, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return nil, err
			}
			sim, err := sub.IndexManifest()
			if err != nil {
				return nil, err
			}
			pd, p, err := m.o.Platform.Pick(r.String(), sim)
			if err != nil {
				return nil, err
			}
			if img, err = sub.Image(pd.Digest); err != nil {
				return nil, err
			}
			plat = p
		case d.MediaType.IsImage():
			if img, err = idx.Image(d.Digest); err != nil {
				return nil, err
			}
			if got, err := img.Digest(); err != nil || got != d.Digest {
				return nil, fmt.Errorf("load: manifests[%d]: blob is not %s: %w", i, d.Digest, ErrDigest)
			}
		default:
			return nil, fmt.Errorf("load: manifests[%d]: media type %q is no image", i, d.MediaType)
		}
		rec, err := m.store(ctx, r, d.Digest.String(), img, plat, true, true, o)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", r, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func (m *Images) loadDocker(ctx context.Context, archive, dir, ref string, o PullOptions) ([]*Record, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, err
	}
	var ms []dockerManifest
	if err := json.Unmarshal(b, &ms); err != nil {
		return nil, fmt.Errorf("load: manifest.json: %w", err)
	}
	if len(ms) == 0 || (ref != "" && len(ms) > 1) {
		return nil, fmt.Errorf("load: manifest.json lists %d images; want one when a name is given", len(ms))
	}
	var out []*Record
	for i, dm := range ms {
		n := ref
		if n == "" && len(dm.RepoTags) > 0 {
			n = dm.RepoTags[0]
		}
		if n == "" {
			return nil, fmt.Errorf("load: manifest.json[%d] has no RepoTags; give a name", i)
		}
		r, err := ParseReference(n)
		if err != nil {
			return nil, err
		}
		var tag *name.Tag
		if len(dm.RepoTags) > 0 {
			t, err := name.NewTag(dm.RepoTags[0])
			if err != nil {
				return nil, fmt.Errorf("load: manifest.json[%d].RepoTags: %w", i, err)
			}
			tag = &t
		}
		img, err := tarball.ImageFromPath(archive, tag)
		if err != nil {
			return nil, fmt.Errorf("load: %w", err)
		}
		digest, err := img.Digest()
		if err != nil {
			return nil, err
		}
		// Docker's layers are plain tars named by path: only their
		// diff_ids can be checked.
		rec, err := m.store(ctx, r, digest.String(), img, Platform{}, false, true, o)
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", r, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// untarPlain unpacks the regular files and directories of an archive
// into dir, refusing names with "..", and returns the top-level names.
func untarPlain(archive, dir string) (map[string]bool, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		rel, err := cleanName(h.Name)
		if err != nil || rel == "" {
			if err != nil {
				return nil, err
			}
			continue
		}
		top, _, _ := strings.Cut(rel, "/")
		names[top] = true
		p := filepath.Join(dir, rel)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				return nil, err
			}
		case tar.TypeReg, tar.TypeRegA:
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				return nil, err
			}
			out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			if err != nil {
				return nil, err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return nil, err
			}
			if err := out.Close(); err != nil {
				return nil, err
			}
		}
	}
}
