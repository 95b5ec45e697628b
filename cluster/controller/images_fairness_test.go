package controller

import (
	"context"
	"strings"
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
