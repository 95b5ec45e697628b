package attach

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/legionbsd/legion/sys"
)

// While one task attaches a volume, another's detach of the same volume
// waits (here until its context ends, the record kept); other volumes do
// not wait.
func TestAttachAndDetachOfAVolumeExcludeEachOther(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	a := node(t, PlatformJails, f)
	t1, t2 := taskDir(t, a, "t1"), taskDir(t, a, "t2")
	if _, err := a.Attach(context.Background(), t1, nfsVolume("")); err != nil {
		t.Fatal(err)
	}
	unlock, err := a.lock(context.Background(), "shop/media") // a start of shop/media under way
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	f.Reset()

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := a.Detach(ctx, t1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Detach during another task's attach: %v, want it to wait for the lock", err)
	}
	wantLines(t, f)
	if r := records(t, t1); len(r) != 1 {
		t.Errorf("records after the waiting detach: %+v, want the nfs record kept", r)
	}

	other := nfsVolume("")
	other.Metadata.Name = "assets"
	if _, err := a.Attach(context.Background(), t2, other); err != nil {
		t.Fatalf("Attach of another volume: %v, want it not to wait", err)
	}
}
