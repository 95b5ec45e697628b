package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// A registry that takes the connection and never answers, named by a
// pod of one namespace, holds up that namespace only: another
// namespace's service is resolved while the question hangs. And the
// question ends at the resolver's timeout, saying so in the status.
func TestImageResolverASilentRegistryHoldsUpItsNamespaceOnly(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	// blocked sorts before default: a pass comes to it first.
	put(t, s, `apiVersion: legion/v1
kind: Service
metadata: {name: stuck, namespace: blocked}
spec:
  pod: {containers: [{name: c, image: "silent.test/app:1"}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod: {containers: [{name: c, image: "fast.test/web:1"}]}
`)
	const digest = "sha256:" + "ab00000000000000000000000000000000000000000000000000000000000000"
	var hanging, answered atomic.Int32
	resolve := func(ctx context.Context, ref string, _ [][]byte) (string, error) {
		if strings.HasPrefix(ref, "silent.test/") {
			hanging.Add(1)
			defer hanging.Add(-1)
			<-ctx.Done() // the connection taken, no answer ever
			return "", ctx.Err()
		}
		answered.Add(1)
		return digest, nil
	}
	images := func(ns, name string) *legion.ImagesStatus {
		o, _, err := s.Get(legion.KindService, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Service).Status.Images
	}

	r := &ImageResolver{Store: s, Resolve: resolve, Timeout: time.Hour}
	runUntilEnd(t, r.Run)
	poll(t, "web's image pinned while blocked's registry is silent", func() bool {
		im := images("default", "web")
		return im != nil && im.Digests["fast.test/web:1"] == digest
	})
	if hanging.Load() != 1 {
		t.Fatalf("%d questions to the silent registry outstanding once web was resolved, want the one", hanging.Load())
	}

	// With a timeout, the silent registry's image fails, saying why.
	r2 := &ImageResolver{Store: s, Resolve: resolve, Timeout: 50 * time.Millisecond}
	if failed := r2.Pass(context.Background()); !failed {
		t.Fatal("a pass with a silent registry did not fail")
	}
	if im := images("blocked", "stuck"); im == nil || !strings.Contains(im.Message, "silent.test/app:1: the registry did not answer within 50ms") {
		t.Fatalf("status of the service whose registry is silent: %+v, want it to say the registry did not answer", im)
	}
}

// A namespace's owners are resolved ResolveParallel at a time, not one
// after the other: each owner's registry question and status write wait
// for a round trip, and an update of many services in one namespace
// waited for all of them in a row. An owner done makes room for the next.
func TestImageResolverResolvesANamespacesOwnersSideBySide(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	owners := 2*ResolveParallel + 3
	var manifest strings.Builder
	for i := range owners {
		fmt.Fprintf(&manifest, `---
apiVersion: legion/v1
kind: Service
metadata: {name: web-%d}
spec:
  pod: {containers: [{name: c, image: "registry.test/web-%d:1"}]}
`, i, i)
	}
	put(t, s, manifest.String())
	const digest = "sha256:" + "cd00000000000000000000000000000000000000000000000000000000000000"
	// Every question waits for the test to answer it.
	var mu sync.Mutex
	asked, most := 0, 0
	release := make(chan struct{})
	resolve := func(ctx context.Context, ref string, _ [][]byte) (string, error) {
		mu.Lock()
		asked++
		most = max(most, asked)
		mu.Unlock()
		defer func() { mu.Lock(); asked--; mu.Unlock() }()
		select {
		case <-release:
			return digest, nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	waiting := func(n int) func() bool {
		return func() bool { mu.Lock(); defer mu.Unlock(); return asked == n }
	}
	resolved := func() int {
		n := 0
		for i := range owners {
			o, _, err := s.Get(legion.KindService, "default", fmt.Sprint("web-", i))
			if err != nil {
				t.Fatal(err)
			}
			if im := o.(*legion.Service).Status.Images; im != nil && im.Digests[fmt.Sprintf("registry.test/web-%d:1", i)] == digest {
				n++
			}
		}
		return n
	}
	runUntilEnd(t, (&ImageResolver{Store: s, Resolve: resolve, Timeout: time.Hour}).Run)
	poll(t, fmt.Sprint(ResolveParallel, " questions asked at once"), waiting(ResolveParallel))
	release <- struct{}{}
	poll(t, "the answered owner's images pinned", func() bool { return resolved() == 1 })
	poll(t, "the next owner asked for in its place", waiting(ResolveParallel))
	close(release)
	poll(t, "every owner's images pinned", func() bool { return resolved() == owners })
	mu.Lock()
	defer mu.Unlock()
	if most != ResolveParallel {
		t.Fatalf("at most %d owners were resolved at once, want %d", most, ResolveParallel)
	}
}

// Owners resolved at once that share a tag ask the registry once between
// them, and its failure counts once toward the tag's wait before the next
// question (counted once per owner, the first failure would have sent the
// wait to its longest).
func TestImageResolverAsksOnceForATagItsOwnersShare(t *testing.T) {
	t.Parallel()
	var asked atomic.Int32
	release := make(chan struct{})
	r := &ImageResolver{Resolve: func(ctx context.Context, ref string, _ [][]byte) (string, error) {
		asked.Add(1)
		<-release
		return "", errors.New("lookup registry.test: no such host")
	}}
	r.defaults()
	var started atomic.Int32
	errs := make(chan error, ResolveParallel)
	for range ResolveParallel {
		go func() {
			started.Add(1)
			_, err := r.resolveImage(context.Background(), "registry.test/web:1", nil)
			errs <- err
		}()
	}
	poll(t, "every owner asking", func() bool { return started.Load() == ResolveParallel && asked.Load() > 0 })
	close(release)
	for range ResolveParallel {
		if err := <-errs; err == nil || !strings.Contains(err.Error(), "no such host") {
			t.Fatalf("an owner's answer: %v, want the registry's failure", err)
		}
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("the registry was asked %d times, want once", n)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.images[imageKey("registry.test/web:1", nil)]; f == nil || f.count != 1 {
		t.Fatalf("the tag's failures: %+v, want one", f)
	}
}
