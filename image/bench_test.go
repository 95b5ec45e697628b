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
	"syscall"
	"testing"
	"time"

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
// in-process registry, by Legion and, where installed, by skopeo and
// umoci, in the same run. Legion does strictly more than skopeo-copy-dir:
//
//   - legion-dirstore: Legion's pull into the directory store: blobs
//     fetched (three at once) and checked against their digests,
//     decompressed and checked against their diff_ids, then extracted,
//     each layer a tree of its own (the files it leaves alone hard links
//     to the layer below).
//   - legion-layers-only: the same, each layer extracted into an empty
//     directory: fetching, checking and extraction alone.
//   - skopeo-copy-dir: `skopeo copy` to a directory: blobs fetched and
//     checked against their digests, nothing decompressed or extracted.
//   - skopeo-umoci-unpack: the same work as Legion's with the tools
//     people would use: `skopeo copy` to an OCI layout, then
//     `umoci raw unpack` of its layers into one root file system.
//
// Each row reports MB/s (uncompressed bytes) and cpu-ms/op, the CPU this
// process (the registry included) and the tools it ran used per pull.
func BenchmarkPullExtract(b *testing.B) {
	benchPull(b, 4, 50, 1<<20)
}

// BenchmarkPullExtractSmallFiles is BenchmarkPullExtract with an image
// of two layers of 1,000 files of 4 KiB each, as a system's are: the
// costs per file (creating, owning, timing it) over the costs per byte.
func BenchmarkPullExtractSmallFiles(b *testing.B) {
	benchPull(b, 2, 1000, 4<<10)
}

// benchPull runs BenchmarkPullExtract's rows for an image of layers
// layers of files files of size bytes each.
func benchPull(b *testing.B, layerCount, files, size int) {
	ctx := context.Background()
	reg := startRegistry(b, nil)
	var layers []v1.Layer
	var total int64
	for i := 0; i < layerCount; i++ {
		l, n := benchLayer(b, uint64(i+1), files, size)
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
	b.Logf("image: %d MB uncompressed, %d MB compressed, %d layers of %d files", total>>20, compressed>>20, layerCount, files)

	b.Run("legion-dirstore", func(b *testing.B) {
		b.SetBytes(total)
		cpu := &cpuMeter{b: b}
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			m, _, dir := newImages(b, freebsdAmd64)
			cpu.startTimer()
			if _, err := m.Pull(ctx, reg.ref("bench/big:1"), PullOptions{Now: t0}); err != nil {
				b.Fatal(err)
			}
			cpu.stopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
		cpu.report()
	})
	b.Run("legion-layers-only", func(b *testing.B) {
		// The same pull with a store that extracts each layer into an
		// empty directory, to show the cost of the directory store's
		// full copies apart from fetching and extraction.
		b.SetBytes(total)
		cpu := &cpuMeter{b: b}
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := b.TempDir()
			ds := newDirStore(b, filepath.Join(dir, "s"))
			m, err := Open(Options{DataDir: filepath.Join(dir, "d"), Store: flatStore{ds}, Platform: freebsdAmd64})
			if err != nil {
				b.Fatal(err)
			}
			cpu.startTimer()
			if _, err := m.Pull(ctx, reg.ref("bench/big:1"), PullOptions{Now: t0}); err != nil {
				b.Fatal(err)
			}
			cpu.stopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
		cpu.report()
	})
	b.Run("skopeo-copy-dir", func(b *testing.B) {
		bin, err := exec.LookPath("skopeo")
		if err != nil {
			b.Skip("skopeo not installed (apt-get install skopeo)")
		}
		b.SetBytes(total)
		cpu := &cpuMeter{b: b}
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			out := filepath.Join(b.TempDir(), "x")
			cpu.startTimer()
			cmd := exec.Command(bin, "copy", "--src-tls-verify=false", "--override-os", "freebsd", "docker://"+reg.ref("bench/big:1"), "dir:"+out)
			if msg, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("skopeo: %v: %s", err, msg)
			}
			cpu.stopTimer()
			os.RemoveAll(out)
			b.StartTimer()
		}
		cpu.report()
	})
	b.Run("skopeo-umoci-unpack", func(b *testing.B) {
		// The work Legion does, done with the tools people would use: skopeo
		// copies the image to an OCI layout (blobs checked against their
		// digests) and umoci unpacks its layers, in order, into one root
		// file system (decompressing each and checking its diff_id).
		skopeo, err := exec.LookPath("skopeo")
		if err != nil {
			b.Skip("skopeo not installed (apt-get install skopeo)")
		}
		umoci, err := exec.LookPath("umoci")
		if err != nil {
			b.Skip("umoci not installed (apt-get install umoci)")
		}
		b.SetBytes(total)
		cpu := &cpuMeter{b: b}
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			dir := b.TempDir()
			layout, bundle := filepath.Join(dir, "oci"), filepath.Join(dir, "bundle")
			cpu.startTimer()
			cmd := exec.Command(skopeo, "copy", "--src-tls-verify=false", "--override-os", "freebsd", "docker://"+reg.ref("bench/big:1"), "oci:"+layout+":1")
			if msg, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("skopeo: %v: %s", err, msg)
			}
			// raw unpack: the root file system only (umoci's runtime
			// config knows no FreeBSD).
			args := []string{"raw", "unpack", "--image", layout + ":1", bundle}
			if os.Geteuid() != 0 {
				args = []string{"raw", "unpack", "--rootless", "--image", layout + ":1", bundle}
			}
			if msg, err := exec.Command(umoci, args...).CombinedOutput(); err != nil {
				b.Fatalf("umoci: %v: %s", err, msg)
			}
			cpu.stopTimer()
			os.RemoveAll(dir)
			b.StartTimer()
		}
		cpu.report()
	})
}

// cpuTime is the CPU this process (the registry serving the blobs
// included) and its waited-for children (skopeo, umoci) have used.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// cpuMeter adds up the CPU used while a benchmark's timer runs, and
// reports it per operation: the work each row does, which the machine's
// load changes less than its time.
type cpuMeter struct {
	b     *testing.B
	start time.Duration
	total time.Duration
}

// startTimer starts a timed pull on a quiet disk: what earlier pulls
// wrote and removed is written back first, so no row pays for another's.
func (c *cpuMeter) startTimer() {
	syscall.Sync()
	c.b.StartTimer()
	c.start = cpuTime()
}
func (c *cpuMeter) stopTimer() { c.total += cpuTime() - c.start; c.b.StopTimer() }
func (c *cpuMeter) report() {
	c.b.ReportMetric(float64(c.total.Microseconds())/1000/float64(c.b.N), "cpu-ms/op")
}

// flatStore begins every layer empty: a benchmark aid only.
type flatStore struct{ *DirStore }

func (f flatStore) BeginLayer(ctx context.Context, chainID, _ string) (PendingLayer, error) {
	return f.DirStore.BeginLayer(ctx, chainID, "")
}
