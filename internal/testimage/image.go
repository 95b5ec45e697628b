package testimage

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: uid and gid 1000, home /app.
const (
	UserName = "app"
	UserID   = 1000
)

// Passwd and Group are the image's /etc/passwd and /etc/group.
const (
	Passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"app:x:1000:1000:app:/app:/sbin/nologin\n"
	Group = "root:x:0:\n" +
		"app:x:1000:\n" +
		"web:x:1001:app\n"
)

// Options shape an image; the zero value is the server as user app
// serving :8080.
type Options struct {
	GOOS, GOARCH string   // the host's when empty
	Cmd          []string // arguments after the entrypoint (server flags)
	Env          []string // KEY=VALUE, after PATH=/app
	User         string   // UserName when empty; "0" for root
	WorkDir      string   // /app when empty
}

// epoch is every file's time, so the same binary gives the same digests.
var epoch = time.Unix(1700000000, 0).UTC()

// Build compiles the server and packs it as a single-layer OCI image.
func Build(ctx context.Context, o Options) (v1.Image, error) {
	work, err := os.MkdirTemp("", "testimage-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	bin := filepath.Join(work, "server")
	if err := BuildServer(ctx, bin, o.GOOS, o.GOARCH); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	return Pack(data, o)
}

// Pack makes the image from the server binary's bytes.
func Pack(server []byte, o Options) (v1.Image, error) {
	if o.GOOS == "" {
		o.GOOS = runtime.GOOS
	}
	if o.GOARCH == "" {
		o.GOARCH = runtime.GOARCH
	}
	if o.User == "" {
		o.User = UserName
	}
	if o.WorkDir == "" {
		o.WorkDir = "/app"
	}
	layerTar, err := LayerTar(server)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("testimage: layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "legion testimage", Comment: "the test server at " + ServerPath,
	}})
	if err != nil {
		return nil, fmt.Errorf("testimage: append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = o.GOOS, o.GOARCH
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{ServerPath}
	cf.Config.Cmd = o.Cmd
	cf.Config.Env = append([]string{"PATH=/app"}, o.Env...)
	cf.Config.User = o.User
	cf.Config.WorkingDir = o.WorkDir
	cf.Config.ExposedPorts = map[string]struct{}{"8080/tcp": {}}
	cf.Config.StopSignal = "SIGTERM"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("testimage: config: %w", err)
	}
	return img, nil
}

// LayerTar is the image's one layer, uncompressed: the root's mode (0755),
// the server at /app/server, a minimal /etc/passwd and /etc/group, and
// /tmp.
func LayerTar(server []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: mode, ModTime: epoch, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, uid int, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)),
			Uid: uid, Gid: uid, ModTime: epoch, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	for _, step := range []func() error{
		// The root's own mode: without it an extractor may leave "/"
		// private to root, and the image's user could not reach /app.
		func() error { return dir("./", 0o755) },
		func() error { return dir("app/", 0o755) },
		func() error { return file("app/server", 0o755, 0, server) },
		func() error { return dir("etc/", 0o755) },
		func() error { return file("etc/passwd", 0o644, 0, []byte(Passwd)) },
		func() error { return file("etc/group", 0o644, 0, []byte(Group)) },
		func() error { return dir("tmp/", 0o1777) },
	} {
		if err := step(); err != nil {
			return nil, fmt.Errorf("testimage: layer tar: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("testimage: layer tar: %w", err)
	}
	return buf.Bytes(), nil
}
