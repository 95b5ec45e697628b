package controller

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/testimage"
	"github.com/legionbsd/legion/internal/testpoll"
	"github.com/legionbsd/legion/scheduler"
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

// Only an event that may give the resolver work wakes it: a resolved
// owner's status written again (the planner does so at every pass of a
// rollout) does not; a new pod, a failure recorded, an owner made or
// removed, a Secret or an image policy do.
func TestOnlyWhatMayGiveWorkWakesTheResolver(t *testing.T) {
	t.Parallel()
	pod := legion.PodSpec{Containers: []legion.Container{{Name: "web", Image: "registry.example/shop/web:1"}}}
	done := &legion.ImagesStatus{PodHash: scheduler.PodHash(&pod), Digests: map[string]string{"web": "sha256:" + strings.Repeat("a", 64)}}
	service := func(pod legion.PodSpec, st *legion.ImagesStatus) *legion.Service {
		s := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService, Metadata: legion.Metadata{Namespace: "default", Name: "web"}}}
		s.Spec.Pod, s.Status.Images, s.Status.Ready = pod, st, 3
		return s
	}
	job := func(pod legion.PodSpec, st *legion.ImagesStatus) *legion.Job {
		j := &legion.Job{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindJob, Metadata: legion.Metadata{Namespace: "default", Name: "once"}}}
		j.Spec.Pod, j.Status.Images = pod, st
		return j
	}
	newPod := legion.PodSpec{Containers: []legion.Container{{Name: "web", Image: "registry.example/shop/web:2"}}}
	failed := *done
	failed.Message = "resolving registry.example/shop/web:1: no such host"
	for _, c := range []struct {
		what string
		typ  store.EventType
		o    legion.Object
		want bool
	}{
		{"a resolved Service's status written again", store.Modified, service(pod, done), false},
		{"a resolved Job's status written again", store.Modified, job(pod, done), false},
		{"a Service given a new pod", store.Modified, service(newPod, done), true},
		{"a Job given a new pod", store.Modified, job(newPod, done), true},
		{"a failure recorded", store.Modified, service(pod, &failed), true},
		{"a Service with no images recorded", store.Modified, service(pod, nil), true},
		{"a Service made", store.Added, service(pod, done), true},
		{"a Service removed", store.Deleted, service(pod, done), true},
		{"a Secret changed", store.Modified, &legion.Secret{Header: legion.Header{Kind: legion.KindSecret}}, true},
		{"an image policy changed", store.Modified, &legion.ImagePolicy{Header: legion.Header{Kind: legion.KindImagePolicy}}, true},
	} {
		if got := givesWork(store.Event{Type: c.typ, Object: c.o}); got != c.want {
			t.Errorf("%s: wakes the resolver %v, want %v", c.what, got, c.want)
		}
	}

	// Running, the resolver takes a pod changed under a status that
	// still names the old one.
	s := openStore(t)
	calls := map[string]int{}
	var mu sync.Mutex
	resolve := func(ctx context.Context, ref string, _ [][]byte) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[ref]++
		return "sha256:" + strings.Repeat("b", 64), nil
	}
	runUntilEnd(t, (&ImageResolver{Store: s, Resolve: resolve}).Run)
	ctx := context.Background()
	resolvedTo := func(what string, p *legion.PodSpec) {
		t.Helper()
		testpoll.Until(t, what, 10*time.Second, 5*time.Millisecond, func() bool {
			o, _, err := s.Get(legion.KindService, "default", "web")
			if err != nil {
				t.Fatal(err)
			}
			st := o.(*legion.Service).Status.Images
			return st != nil && st.PodHash == scheduler.PodHash(p) && st.Message == ""
		})
	}
	if _, _, err := s.Put(ctx, service(pod, nil), store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	resolvedTo("the first pod resolved", &pod)
	o, _, err := s.Get(legion.KindService, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	changed := o.(*legion.Service)
	changed.Spec.Pod = newPod
	if _, _, err := s.Put(ctx, changed, store.WriteOptions{KeepStatus: true}); err != nil {
		t.Fatal(err)
	}
	resolvedTo("the new pod resolved", &newPod)
	mu.Lock()
	defer mu.Unlock()
	if calls["registry.example/shop/web:1"] != 1 || calls["registry.example/shop/web:2"] != 1 {
		t.Errorf("registry asked %v, want each tag once", calls)
	}
}

// The planner writes an owner's status while the resolver asks the
// registry; the resolver's write then meets a newer version. It reads the
// owner again and writes the images over the planner's status, keeping
// what the planner wrote, in the same round: the registry is not asked
// twice.
func TestImageResolverWritesOverAStatusWrittenMeanwhile(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	put(t, s, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod: {containers: [{name: c, image: "registry.test/web:1"}]}
`)
	const digest = "sha256:" + "ef00000000000000000000000000000000000000000000000000000000000000"
	asked := 0
	resolve := func(ctx context.Context, ref string, _ [][]byte) (string, error) {
		asked++
		// The planner's write, between the resolver's read and its own.
		o, _, err := s.Get(legion.KindService, "default", "web")
		if err != nil {
			return "", err
		}
		o.(*legion.Service).Status.Message = "waiting for its images"
		if err := s.WriteStatus(ctx, o, store.Precondition{Version: o.GetMetadata().Version}); err != nil {
			return "", err
		}
		return digest, nil
	}
	r := &ImageResolver{Store: s, Resolve: resolve}
	if failed := r.Pass(context.Background()); failed {
		t.Fatal("the pass failed")
	}
	o, _, err := s.Get(legion.KindService, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	st := o.(*legion.Service).Status
	if st.Images == nil || st.Images.Digests["registry.test/web:1"] != digest {
		t.Fatalf("images status after the pass: %+v, want the tag pinned", st.Images)
	}
	if st.Message != "waiting for its images" {
		t.Fatalf("the planner's status message is %q: the resolver wrote over it with what it had read", st.Message)
	}
	if asked != 1 {
		t.Fatalf("the registry was asked %d times, want once", asked)
	}
}

// A spec changed while the resolver asked the registry gets none of the
// old pod's images written over its status: the next round resolves
// the new pod.
func TestImageResolverWritesNothingForAPodReplacedMeanwhile(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	manifest := `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  pod: {containers: [{name: c, image: "registry.test/web:1"}]}
`
	put(t, s, manifest)
	const digest = "sha256:" + "ef00000000000000000000000000000000000000000000000000000000000000"
	resolve := func(ctx context.Context, ref string, _ [][]byte) (string, error) {
		if ref == "registry.test/web:1" {
			// The update, between the resolver's read and its write.
			o, _, err := s.Get(legion.KindService, "default", "web")
			if err != nil {
				return "", err
			}
			o.(*legion.Service).Spec.Pod.Containers[0].Image = "registry.test/web:2"
			if _, _, err := s.Put(ctx, o, store.WriteOptions{KeepStatus: true}); err != nil {
				return "", err
			}
		}
		return digest, nil
	}
	r := &ImageResolver{Store: s, Resolve: resolve}
	r.Pass(context.Background())
	o, _, err := s.Get(legion.KindService, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if img := o.(*legion.Service).Spec.Pod.Containers[0].Image; img != "registry.test/web:2" {
		t.Fatalf("the service runs %s after the update, want registry.test/web:2", img)
	}
	if im := o.(*legion.Service).Status.Images; im != nil && im.Digests["registry.test/web:1"] != "" {
		t.Fatalf("images status after the pass: %+v; the old pod's images were written over the new pod's status", im)
	}
}
