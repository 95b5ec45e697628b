package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/testimage"
)

// The resolver pins a service's tag to the digest the registry names,
// once per pod, and the planner's new tasks carry it.
func TestImageResolverPinsTagsPerPod(t *testing.T) {
	t.Parallel()
	reg := testimage.NewRegistry(t)
	host, ref := reg.Host(), reg.Ref("shop/web", "1")
	want, err := testimage.PushRandom(context.Background(), ref, 256)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	resolve := func(ctx context.Context, s string, _ [][]byte) (string, error) {
		calls++
		ref, err := name.ParseReference(s)
		if err != nil {
			return "", err
		}
		d, err := remote.Head(ref, remote.WithContext(ctx))
		if err != nil {
			return "", err
		}
		return d.Digest.String(), nil
	}
	s := openStore(t)
	addNode(t, s, "n1")
	put(t, s, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 2
  pod:
    containers:
      - {name: web, image: `+ref+`}
      - {name: local, image: localhost/side:1}
      - {name: pinned, image: `+host+`/shop/web@`+want.String()+`}
`)
	checked := map[string]string{}
	check := func(ctx context.Context, ref, digest string, _ [][]byte) (*legion.VerifiedImage, []string, error) {
		checked[ref] = digest
		return nil, nil, nil
	}
	res := &ImageResolver{Store: s, Resolve: resolve, Check: check}
	if failed := res.Pass(context.Background()); failed {
		t.Fatal("the pass failed")
	}
	pinnedRef := host + "/shop/web@" + want.String()
	if d := cmp.Diff(map[string]string{ref: want.String(), pinnedRef: want.String()}, checked); d != "" {
		t.Fatalf("images checked against the policies (-want +got):\n%s", d)
	}
	o, _, _ := s.Get(legion.KindService, "default", "web")
	im := o.(*legion.Service).Status.Images
	if im == nil || im.Digests[ref] != want.String() || len(im.Digests) != 1 || im.Message != "" {
		t.Fatalf("images status %+v, want only %s pinned to %s", im, ref, want)
	}
	if calls != 1 {
		t.Fatalf("%d registry calls, want 1 (localhost/ and digests ask none)", calls)
	}
	// A second pass over the same pod asks nothing.
	res.Pass(context.Background())
	if calls != 1 {
		t.Fatalf("the same pod was resolved again (%d calls)", calls)
	}
	l := &Loop{Store: s, Signals: &signals{beats: map[string]time.Time{"n1": time.Now()}}, LeaderSince: time.Now().Add(-time.Hour)}
	if _, err := l.Pass(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts := tasks(t, s)
	if len(ts) != 2 {
		t.Fatalf("%d tasks", len(ts))
	}
	for _, task := range ts {
		if task.Spec.Images[ref] != want.String() {
			t.Fatalf("task %s images %v, want the pinned digest", task.Metadata.Name, task.Spec.Images)
		}
	}
	// A tag that does not resolve is said on the status.
	put(t, s, `apiVersion: legion/v1
kind: Job
metadata: {name: j}
spec:
  pod: {containers: [{name: c, image: `+host+`/shop/missing:1}]}
`)
	if failed := res.Pass(context.Background()); !failed {
		t.Fatal("an unresolvable tag did not fail the pass")
	}
	o, _, _ = s.Get(legion.KindJob, "default", "j")
	if m := o.(*legion.Job).Status.Images; m == nil || !strings.Contains(m.Message, "shop/missing:1") {
		t.Fatalf("job images status %+v", m)
	}
}
