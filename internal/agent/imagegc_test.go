package agent

import (
	"context"
	"log/slog"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/testimage"
)

// pushImage pushes a small image (its one file's content set by body) for
// the host's architecture and returns its reference.
func pushImage(t *testing.T, reg *testimage.Registry, repo, body string) string {
	t.Helper()
	img, err := testimage.Pack([]byte(body), testimage.Options{GOOS: "freebsd", GOARCH: runtime.GOARCH})
	if err != nil {
		t.Fatal(err)
	}
	ref := reg.Ref(repo, "1")
	if err := testimage.Push(context.Background(), img, ref); err != nil {
		t.Fatal(err)
	}
	return ref
}

func storedImages(t *testing.T, images *image.Images) []string {
	t.Helper()
	recs, err := images.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Reference)
	}
	return out
}

// The agent collects the node's images: one no task uses goes once its
// hour unused has passed, one an assigned task runs stays however old,
// and goes too once its task is no longer assigned.
func TestAgentCollectsImagesNoTaskUses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := testimage.NewRegistry(t)
	used := pushImage(t, reg, "gc/used", "used")
	unused := pushImage(t, reg, "gc/unused", "unused")
	data := t.TempDir()
	ds, err := image.NewDirStore(filepath.Join(data, "layers"))
	if err != nil {
		t.Fatal(err)
	}
	images, err := image.Open(image.Options{DataDir: data, Store: ds, Log: slog.New(slog.DiscardHandler),
		Platform: image.PlatformRule{Arch: runtime.GOARCH}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(images.Close)

	r := newRig(t)
	r.agent.Images, r.agent.ImageGCEvery = images, 5*time.Millisecond
	if _, err := images.Pull(ctx, unused, image.PullOptions{Now: r.clock.Now()}); err != nil {
		t.Fatal(err)
	}
	r.start(t)
	task := testTask("gc1")
	task.Spec.Pod.Containers[0].Image = used
	task.Spec.Pod.Containers[0].Command = sh("sleep 30") // what the in-memory runtime runs
	r.assign(nil, task)
	r.mgr.await(t, task.Metadata.Name, "the task running", func(s legion.TaskStatus) bool { return s.State == legion.TaskRunning })
	canon := func(ref string) string { c, _ := image.Canonical(ref); return c }
	if got := storedImages(t, images); !slices.Contains(got, canon(used)) || !slices.Contains(got, canon(unused)) {
		t.Fatalf("before the grace passed the store holds %q, want both images", got)
	}

	r.clock.advance(image.DefaultMaxUnused + time.Minute)
	waitFor(t, "the unused image collected", func() bool { return !slices.Contains(storedImages(t, images), canon(unused)) },
		func() string { return "" })
	if got := storedImages(t, images); !slices.Contains(got, canon(used)) {
		t.Fatalf("the image of an assigned task was collected: store holds %q", got)
	}

	r.assign(nil)
	waitFor(t, "the image of the task no longer assigned collected", func() bool { return len(storedImages(t, images)) == 0 },
		func() string { return "" })
}
