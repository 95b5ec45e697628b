package volumes

import (
	"context"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// benchTree writes a 256 MiB tree of mixed sizes (many small files, some
// medium, a few large) with incompressible content, and returns its size.
func benchTree(b *testing.B, root string) int64 {
	b.Helper()
	rng := rand.NewChaCha8([32]byte{1})
	sets := []struct {
		n    int
		size int
	}{{2048, 4 << 10}, {192, 256 << 10}, {12, 16 << 20}}
	var total int64
	buf := make([]byte, 16<<20)
	for _, s := range sets {
		for i := 0; i < s.n; i++ {
			dir := filepath.Join(root, "d"+string(rune('a'+i%16)))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				b.Fatal(err)
			}
			_, _ = rng.Read(buf[:s.size])
			p := filepath.Join(dir, "f"+string(rune('a'+i%26))+itoa(i)+"-"+itoa(s.size))
			if err := os.WriteFile(p, buf[:s.size], 0o644); err != nil {
				b.Fatal(err)
			}
			total += int64(s.size)
		}
	}
	return total
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var d []byte
	for ; i > 0; i /= 10 {
		d = append([]byte{byte('0' + i%10)}, d...)
	}
	return string(d)
}

// BenchmarkDirSendReceive moves a volume between two Dirs through a pipe,
// as a migration does (the snapshot is taken before the clock starts: it
// is taken while the task runs on).
func BenchmarkDirSendReceive(b *testing.B) {
	ctx := context.Background()
	src := NewDir(b.TempDir())
	data, err := src.Ensure(ctx, shopDB, 0, Owner{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchTree(b, data))
	if err := src.Snapshot(ctx, "shop", "db", "bench"); err != nil {
		b.Fatal(err)
	}
	dstRoot := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst := NewDir(filepath.Join(dstRoot, itoa(i)))
		pr, pw := io.Pipe()
		sent := make(chan error, 1)
		go func() {
			err := src.Send(ctx, "shop", "db", "bench", "", pw)
			pw.CloseWithError(err)
			sent <- err
		}()
		rerr := dst.Receive(ctx, shopDB, 0, false, pr)
		pr.CloseWithError(rerr)
		if err := <-sent; err != nil {
			b.Fatal(err)
		}
		if rerr != nil {
			b.Fatal(rerr)
		}
		b.StopTimer()
		if err := os.RemoveAll(filepath.Join(dstRoot, itoa(i))); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkTarPipe is the yardstick: tar -c | tar -x of the same tree.
func BenchmarkTarPipe(b *testing.B) {
	src := b.TempDir()
	b.SetBytes(benchTree(b, src))
	dstRoot := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst := filepath.Join(dstRoot, itoa(i))
		if err := os.Mkdir(dst, 0o755); err != nil {
			b.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", `tar -C "$1" -cf - . | tar -C "$2" -xf - && sync`, "sh", src, dst)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("tar pipe: %v: %s", err, out)
		}
		b.StopTimer()
		if err := os.RemoveAll(dst); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
