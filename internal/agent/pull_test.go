package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/testpoll"
)

// gatedImages holds every pull until release is closed, counting them.
type gatedImages struct {
	fakeImages
	calls   atomic.Int32
	release chan struct{}
}

func (g *gatedImages) Pull(ctx context.Context, ref string, o image.PullOptions) (*image.Record, error) {
	g.calls.Add(1)
	<-g.release
	return g.fakeImages.Pull(ctx, ref, o)
}

// The replicas of a service starting side by side pull their image once,
// not once each (each pull takes the image store's lock and rewrites its
// index); pulls for another namespace or with another login are their
// own, and every caller gets a record of its own.
func TestPullsOfOneImageAtOnceAreMadeOnce(t *testing.T) {
	g := &gatedImages{release: make(chan struct{})}
	a := &Agent{Images: g}
	ctx := context.Background()
	const n = 20
	var asked atomic.Int32
	var wg sync.WaitGroup
	recs := make([]*image.Record, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			asked.Add(1)
			rec, err := a.pull(ctx, "example/web:1", image.PullOptions{Namespace: "shop"})
			if err != nil {
				t.Error(err)
			}
			recs[i] = rec
		}()
	}
	for _, o := range []image.PullOptions{{Namespace: "other"}, {Namespace: "shop", Login: &image.Login{Username: "u"}}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := a.pull(ctx, "example/web:1", o); err != nil {
				t.Error(err)
			}
		}()
	}
	testpoll.Until(t, "every pull asked, the other namespace's and login's under way", 10*time.Second, time.Millisecond, func() bool {
		return asked.Load() == n && g.calls.Load() >= 3
	})
	close(g.release)
	wg.Wait()
	// The twenty of one namespace and login are one or, should one have
	// come once the first was done, a few; without sharing, twenty.
	if c := g.calls.Load(); c > 6 {
		t.Fatalf("%d pulls made for %d asked of one image, namespace and login (plus 2 others)", c, n)
	}
	recs[0].Manifest = "changed"
	if recs[1].Manifest == "changed" {
		t.Fatal("callers share one record")
	}
}
