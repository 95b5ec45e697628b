package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/legionbsd/legion/image"
)

// A node pulls a FreeBSD image into a directory store and makes a
// container root from it.
func Example() {
	ctx := context.Background()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	pushHello(host + "/demo/hello:1")

	dir, _ := os.MkdirTemp("", "legion-example-")
	defer os.RemoveAll(dir)
	store, err := image.NewDirStore(filepath.Join(dir, "store"))
	if err != nil {
		log.Fatal(err)
	}
	images, err := image.Open(image.Options{DataDir: dir, Store: store, Platform: image.PlatformRule{Arch: "amd64"}})
	if err != nil {
		log.Fatal(err)
	}
	defer images.Close()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	rec, err := images.Pull(ctx, host+"/demo/hello:1", image.PullOptions{Namespace: "default", Now: now})
	if err != nil {
		log.Fatal(err)
	}
	root, err := images.PrepareRoot(ctx, "c1", rec.Reference, "default", now)
	if err != nil {
		log.Fatal(err)
	}
	// On Linux as root the root is a mount: removed, it is unmounted.
	defer images.RemoveRoot(ctx, "c1")
	motd, _ := os.ReadFile(filepath.Join(root, "etc/motd"))
	cfg, _ := rec.ParsedConfig()
	fmt.Println(rec.Platform, len(rec.Layers), "layer")
	fmt.Println(cfg.Config.Cmd)
	fmt.Print(string(motd))
	// Output:
	// freebsd/amd64 1 layer
	// [/bin/sh]
	// hello from a jail
}

func pushHello(ref string) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := "hello from a jail\n"
	tw.WriteHeader(&tar.Header{Name: "etc/motd", Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg})
	tw.Write([]byte(body))
	tw.Close()
	// From memory: LayerFromReader would buffer it in a temporary file
	// that nothing removes.
	data := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	})
	if err != nil {
		log.Fatal(err)
	}
	img, _ := mutate.AppendLayers(empty.Image, layer)
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "freebsd", "amd64"
	cf.Config.Cmd = []string{"/bin/sh"}
	img, _ = mutate.ConfigFile(img, cf)
	r, err := name.ParseReference(ref)
	if err != nil {
		log.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		log.Fatal(err)
	}
}
