package testimage

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// AnnotationRefName names an image in an OCI layout's index.
const AnnotationRefName = "org.opencontainers.image.ref.name"

// WriteLayout writes img as an OCI image layout in dir, named ref in the
// index (unnamed when ref is empty).
func WriteLayout(dir string, img v1.Image, ref string) error {
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("testimage: layout %s: %w", dir, err)
	}
	var opts []layout.Option
	if ref != "" {
		opts = append(opts, layout.WithAnnotations(map[string]string{AnnotationRefName: ref}))
	}
	if err := p.AppendImage(img, opts...); err != nil {
		return fmt.Errorf("testimage: layout %s: %w", dir, err)
	}
	return nil
}

// WriteArchive writes img as an OCI archive (an OCI layout in a tar, as
// `podman save --format oci-archive` makes and `legion image load`
// reads) at path.
func WriteArchive(path string, img v1.Image, ref string) error {
	work, err := os.MkdirTemp("", "testimage-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := WriteLayout(work, img, ref); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("testimage: archive: %w", err)
	}
	if err := tarDir(f, work); err != nil {
		f.Close()
		return fmt.Errorf("testimage: archive %s: %w", path, err)
	}
	return f.Close()
}

// tarDir writes dir's files into a tar on w, with names relative to dir.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.ModTime, hdr.AccessTime, hdr.ChangeTime = epoch, epoch, epoch
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
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

// Push uploads img to the registry as ref. Registries on loopback are
// spoken to over plain HTTP.
func Push(ctx context.Context, img v1.Image, ref string, opts ...remote.Option) error {
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		return fmt.Errorf("testimage: reference %q: %w", ref, err)
	}
	if err := remote.Write(r, img, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return fmt.Errorf("testimage: push %s: %w", ref, err)
	}
	return nil
}

// PushRandom uploads a random image of one layer of size bytes as ref
// (see Push) and returns its digest.
func PushRandom(ctx context.Context, ref string, size int64) (v1.Hash, error) {
	img, err := random.Image(size, 1)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("testimage: random image: %w", err)
	}
	if err := Push(ctx, img, ref); err != nil {
		return v1.Hash{}, err
	}
	return img.Digest()
}
