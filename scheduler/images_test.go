package scheduler_test

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

// pinnedRunning is two nodes that run pins, told to run app on image.
func pinnedRunning(t *testing.T, image string) *schedtest.Cluster {
	t.Helper()
	c := schedtest.WithNodes(t, 2)
	pinNodes(c)
	c.ApplyAndConverge(updSpec(image, "stop-first", "pause", 1, "0s", ""))
	return c
}

func pinNodes(c *schedtest.Cluster) {
	for _, n := range c.Nodes {
		n.Status.ImagePins = true
	}
}

func resolve(c *schedtest.Cluster, name, digest string) {
	s := c.Service(name)
	digests := map[string]string{}
	for _, ct := range s.Spec.Pod.AllContainers() {
		if !strings.HasPrefix(ct.Image, "localhost/") {
			digests[ct.Image] = digest
		}
	}
	s.Status.Images = &legion.ImagesStatus{PodHash: scheduler.PodHash(&s.Spec.Pod), Digests: digests}
}

// holdImages records the leader's pass over name's pod, failed for why
// (none: passed).
func holdImages(c *schedtest.Cluster, name, why string) {
	s := c.Service(name)
	s.Status.Images = &legion.ImagesStatus{PodHash: scheduler.PodHash(&s.Spec.Pod), Message: why}
}

// Once every node runs pins, a pod naming an image by tag gets tasks only
// after the leader resolved its tags for that pod, and an update waits
// with its old tasks running.
func TestTasksWaitForImageDigests(t *testing.T) {
	t.Parallel()
	c := pinnedRunning(t, "registry.example/app:1")
	if got := len(c.Live("app")); got != 0 {
		t.Fatalf("%d tasks before the tag was resolved, want none", got)
	}
	resolve(c, "app", "sha256:aaaa")
	c.Converge()
	live := c.Live("app")
	if len(live) != 4 {
		t.Fatalf("%d tasks after resolving, want 4", len(live))
	}
	for _, tk := range live {
		if tk.Spec.Images["registry.example/app:1"] != "sha256:aaaa" {
			t.Fatalf("task %s images %v, want the pinned digest", tk.Metadata.Name, tk.Spec.Images)
		}
	}
	// An update to an unresolved tag stops nothing.
	c.ApplyAndConverge(updSpec("registry.example/app:2", "stop-first", "pause", 1, "0s", ""))
	if got := images(c, "app")["registry.example/app:1"]; got != 4 {
		t.Fatalf("%d old tasks while the new tag is unresolved, want all 4 running", got)
	}
	resolve(c, "app", "sha256:bbbb")
	c.Run(60 * 1e9)
	if got := images(c, "app")["registry.example/app:2"]; got != 4 {
		t.Fatalf("%d new tasks after resolving, want 4", got)
	}
}

// A local image never waits, and nodes that do not all run pins do not
// hold anything.
func TestLocalImagesAndUnpinnedNodesDoNotWait(t *testing.T) {
	t.Parallel()
	c := pinnedRunning(t, "localhost/app:1")
	if got := len(c.Live("app")); got != 4 {
		t.Fatalf("a local image: %d tasks, want 4 at once", got)
	}
	c2 := schedtest.WithNodes(t, 2)
	c2.ApplyAndConverge(updSpec("registry.example/app:1", "stop-first", "pause", 1, "0s", ""))
	if got := len(c2.Live("app")); got != 4 {
		t.Fatalf("nodes without pins: %d tasks, want 4", got)
	}
}

// While an image policy enforces, a pod of local images waits for the
// leader's check too (a policy may cover them), and one the check holds
// gets no task; a policy that only warns holds nothing back.
func TestLocalImagesWaitForAnEnforcingPolicy(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	pinNodes(c)
	policy, _ := legion.New(legion.KindImagePolicy)
	policy.GetMetadata().Name = "local"
	policy.(*legion.ImagePolicy).Spec = legion.ImagePolicySpec{Repositories: []string{"localhost/**"}, Mode: legion.PolicyEnforce}
	c.Store(policy)
	c.ApplyAndConverge(updSpec("localhost/app:1", "stop-first", "pause", 1, "0s", ""))
	if got := len(c.Live("app")); got != 0 {
		t.Fatalf("%d tasks before the leader checked the local image, want none", got)
	}
	const why = "cannot resolve localhost/app:1: held by image policy local: a localhost/ image is in no registry, so no signature of it can be checked"
	holdImages(c, "app", why)
	c.Converge()
	if got := len(c.Live("app")); got != 0 {
		t.Fatalf("%d tasks of a local image the policy holds, want none", got)
	}
	if msg := c.Service("app").Status.Message; !strings.Contains(msg, why) {
		t.Fatalf("service message %q does not say the policy holds it", msg)
	}
	c.Policies["local"].Spec.Mode = legion.PolicyWarn
	c.ApplyAndConverge(updSpec("localhost/app:2", "stop-first", "pause", 1, "0s", ""))
	if got := images(c, "app")["localhost/app:2"]; got != 4 {
		t.Fatalf("under a warn-mode policy: %d tasks of the local image, want 4 at once", got)
	}
}

// An image by digest has nothing to resolve, but it waits for the leader
// to check it against the image policies, and a check that failed holds
// it.
func TestImagesByDigestWaitForTheCheck(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	pinNodes(c)
	c.ApplyAndConverge(updSpec("registry.example/app@sha256:"+strings.Repeat("ab", 32), "stop-first", "pause", 1, "0s", ""))
	if got := len(c.Live("app")); got != 0 {
		t.Fatalf("%d tasks before the image was checked, want none", got)
	}
	holdImages(c, "app", "cannot resolve registry.example/app@sha256:abab…: held by image policy: unsigned")
	c.Converge()
	if got := len(c.Live("app")); got != 0 {
		t.Fatalf("%d tasks of an image the policy holds, want none", got)
	}
	holdImages(c, "app", "") // checked: no failure
	c.Converge()
	if got := len(c.Live("app")); got != 4 {
		t.Fatalf("%d tasks once checked, want 4", got)
	}
}

// An image that cannot be resolved holds the service's tasks back, and
// the service says why: it has no task to say it.
func TestAnUnresolvableImageIsSaidOnTheService(t *testing.T) {
	t.Parallel()
	c := pinnedRunning(t, "registry.example/app:1")
	const why = "cannot resolve registry.example/app:1: no such host"
	holdImages(c, "app", why)
	c.Converge()
	if got := len(c.Live("app")); got != 0 {
		t.Fatalf("%d tasks of an unresolved image, want none", got)
	}
	if msg := c.Service("app").Status.Message; !strings.Contains(msg, "no task started until its images resolve: "+why) {
		t.Fatalf("service message %q does not say why it has no task", msg)
	}
	resolve(c, "app", "sha256:aaaa")
	c.Converge()
	if msg := c.Service("app").Status.Message; msg != "" || len(c.Live("app")) != 4 {
		t.Fatalf("once resolved: message %q, %d tasks", msg, len(c.Live("app")))
	}
}
