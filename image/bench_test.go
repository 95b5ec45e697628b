package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// benchLayer is a layer of n files of size bytes, half random and half
// text, so it compresses about as a binary image's layers do.
func benchLayer(b *testing.B, seed uint64, n, size int) (v1.Layer, int64) {
	b.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	body := make([]byte, size)
	text := bytes.Repeat([]byte("legion freebsd jail layer "), size/26+1)
	var total int64
	for i := 0; i < n; i++ {
		for j := 0; j < size/2; j += 8 {
			v := r.Uint64()
			for k := 0; k < 8 && j+k < size/2; k++ {
				body[j+k] = byte(v >> (8 * k))
			}
		}
		copy(body[size/2:], text)
		h := &tar.Header{Name: fmt.Sprintf("usr/lib/l%d/f%04d", seed, i), Mode: 0o644, Size: int64(size), ModTime: t0, Typeflag: tar.TypeReg}
		tw.WriteHeader(h)
		tw.Write(body)
		total += int64(size)
	}
	tw.Close()
	data := buf.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		b.Fatal(err)
	}
	return l, total
}

// BenchmarkPullExtract pulls a 200 MB image of four layers from the
// in-process registry into the directory store (a full copy per layer),
// and, where skopeo is installed, times `skopeo copy` of the same image to
// a directory (download and digest checks only, no extraction) beside it.
func BenchmarkPullExtract(b *testing.B) {
	ctx := context.Background()
	reg := startRegistry(b, nil)
	var layers []v1.Layer
	var total int64
	for i := 0; i < 4; i++ {
		l, n := benchLayer(b, uint64(i+1), 50, 1<<20)
		layers = append(layers, l)
		total += n
	}
	img := imageOf(b, Platform{OS: "freebsd", Arch: "amd64"}, layers...)
	pushImage(b, reg.ref("bench/big:1"), img)
	var compressed int64
	for _, l := range layers {
		s, _ := l.Size()
		compressed += s
	}
	b.Logf("image: %d MB uncompressed, %d MB compressed, 4 layers", total>>20, compressed>>20)

	b.Run("legion-dirstore", func(b *testing.B) {
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			m, _, dir := newImages(b, freebsdAmd64)
			b.StartTimer()
			if _, err := m.Pull(ctx, reg.ref("bench/big:1"), PullOptions{Now: t0}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
	b.Run("legion-layers-only", func(b *testing.B) {
		// The same pull with a store that extracts each layer into an
		// empty directory, to show the cost of the directory store's
		// full copies apart from fetching and extraction.
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := b.TempDir()
			ds, _ := NewDirStore(filepath.Join(dir, "s"))
			m, err := Open(Options{DataDir: filepath.Join(dir, "d"), Store: flatStore{ds}, Platform: freebsdAmd64})
			if err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
			if _, err := m.Pull(ctx, reg.ref("bench/big:1"), PullOptions{Now: t0}); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
	})
	b.Run("skopeo-copy-dir", func(b *testing.B) {
		bin, err := exec.LookPath("skopeo")
		if err != nil {
			b.Skip("skopeo not installed (apt-get install skopeo)")
		}
		b.SetBytes(total)
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			out := filepath.Join(b.TempDir(), "x")
			b.StartTimer()
			cmd := exec.Command(bin, "copy", "--src-tls-verify=false", "--override-os", "freebsd", "docker://"+reg.ref("bench/big:1"), "dir:"+out)
			if msg, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("skopeo: %v: %s", err, msg)
			}
			b.StopTimer()
			os.RemoveAll(out)
			b.StartTimer()
		}
	})
}

// flatStore begins every layer empty: a benchmark aid only.
type flatStore struct{ *DirStore }

func (f flatStore) BeginLayer(ctx context.Context, chainID, _ string) (PendingLayer, error) {
	return f.DirStore.BeginLayer(ctx, chainID, "")
}
