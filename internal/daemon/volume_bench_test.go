package daemon

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/agent/volumes"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testcluster"
)

// migrationSize is the volume BenchmarkVolumeMigration moves.
const migrationSize = 1 << 30

// fillRandom writes size bytes of incompressible data into dir as files
// of 64 MiB.
func fillRandom(b *testing.B, dir string, size int64) {
	b.Helper()
	const file = 64 << 20
	r := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 1<<20)
	for i := int64(0); i*file < size; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("part-%03d", i)))
		if err != nil {
			b.Fatal(err)
		}
		for n := int64(0); n < min(file, size-i*file); n += int64(len(buf)) {
			r.Read(buf)
			if _, err := f.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVolumeMigration moves a 1 GiB volume between two workers'
// agents through a manager's sessions, as a drain's full copy does
// (snapshot, stream out, relay, receive whole, sync), beside
// `tar -c | tar -x` of the same directory with a sync, in the same run.
// Run it with -benchtime=3x.
func BenchmarkVolumeMigration(b *testing.B) {
	c := testcluster.New(b, testcluster.Options{Workers: 2})
	startWorkerAgents(b, c)
	from, to := c.Workers[0].Server.NodeID(), c.Workers[1].Server.NodeID()
	ref := volumes.Ref{Namespace: "default", Name: "big", UID: "00000000-0000-4000-8000-00000000b16b"}
	path, err := volumes.NewDir(c.Workers[0].Dir).Ensure(context.Background(), ref, 0, volumes.Owner{})
	if err != nil {
		b.Fatal(err)
	}
	fillRandom(b, path, migrationSize)
	sess := c.Managers[0].Server.Sessions()
	// The agents reach the manager's sessions moments after they start:
	// dropping a volume neither holds answers once they do.
	poll(b, "both agents on the manager's sessions", time.Minute, func() bool {
		for _, n := range []string{from, to} {
			if sess.DropVolume(context.Background(), n, &legionpb.VolumeDropOffer{Namespace: "default", Volume: "none"}) != nil {
				return false
			}
		}
		return true
	})

	b.Run("legion", func(b *testing.B) {
		b.SetBytes(migrationSize)
		for i := range b.N {
			send := &legionpb.VolumeSendOffer{Namespace: ref.Namespace, Volume: ref.Name, VolumeUid: ref.UID, Snapshot: fmt.Sprintf("%sbench-%d-full", volumes.MoveSnapshotPrefix, i)}
			recv := &legionpb.VolumeReceiveOffer{Namespace: ref.Namespace, Volume: ref.Name, VolumeUid: ref.UID}
			if err := sess.CopyVolume(context.Background(), from, to, send, recv); err != nil {
				b.Fatalf("copying the volume: %v", err)
			}
		}
	})
	b.Run("tar", func(b *testing.B) {
		b.SetBytes(migrationSize)
		for range b.N {
			dst := b.TempDir()
			cmd := exec.Command("sh", "-c", `tar -C "$1" -cf - . | tar -C "$2" -xf - && sync`, "sh", path, dst)
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("tar pipe: %v\n%s", err, out)
			}
		}
	})
}
