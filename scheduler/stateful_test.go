package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

const dbYAML = `
apiVersion: legion/v1
kind: Service
metadata: {name: db}
spec:
  mode: stateful
  replicas: REPLICAS
  pod:
    containers: [{name: db, image: IMAGE, volumeMounts: [{name: data, path: /var/db}]}]
    volumes: [{name: data, claim: {size: SIZE}}]
`

func db(replicas, image, size string) string {
	return strings.NewReplacer("REPLICAS", replicas, "IMAGE", image, "SIZE", size).Replace(dbYAML)
}

func TestStatefulOrdinalsStartInOrderWithTheirVolumes(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.Ready = false
	c.ApplyAndConverge(db("3", "db:1", "1Gi"))
	if got := schedtest.SortedNames(c.Live("db")); !cmp.Equal(got, []string{"db-0-1"}) {
		t.Fatalf("before ordinal 0 is ready: %v, want only db-0-1", got)
	}
	tk := c.Task("db-0-1")
	if tk.Spec.Hostname != "db-0" || tk.Spec.Slot != 0 || !cmp.Equal(tk.Spec.Volumes, map[string]string{"data": "data-db-0"}) {
		t.Fatalf("ordinal 0: hostname %q slot %d volumes %v", tk.Spec.Hostname, tk.Spec.Slot, tk.Spec.Volumes)
	}
	var vols []string
	for k, v := range c.Volumes {
		vols = append(vols, k)
		if v.Spec.Size != 1<<30 || v.Metadata.Labels["legion.service"] != "db" {
			t.Fatalf("volume %s: %+v", k, v)
		}
	}
	if diff := cmp.Diff([]string{"default/data-db-0", "default/data-db-1", "default/data-db-2"}, sortStrings(vols)); diff != "" {
		t.Fatalf("claim volumes (-want +got):\n%s", diff)
	}
	c.SetTask("db-0-1", func(tk *legion.Task) { tk.Status.Ready = true })
	c.Converge()
	if got := schedtest.SortedNames(c.Live("db")); !cmp.Equal(got, []string{"db-0-1", "db-1-1"}) {
		t.Fatalf("after ordinal 0 is ready: %v", got)
	}
	c.SetTask("db-1-1", func(tk *legion.Task) { tk.Status.Ready = true })
	c.Converge()
	if n := len(c.Live("db")); n != 3 {
		t.Fatalf("after ordinal 1 is ready: %d tasks", n)
	}
}

func TestStatefulTaskGoesToItsVolumesNode(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.Apply(`
apiVersion: legion/v1
kind: Volume
metadata: {name: data-db-0}
spec: {size: 1Gi}
`)
	v := c.Volumes["default/data-db-0"]
	v.Status.Node = "n3"
	c.ApplyAndConverge(db("1", "db:1", "1Gi"))
	if diff := cmp.Diff(map[string]int{"n3": 1}, c.NodesOf("db")); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// With its node paused, it waits and says where.
	c.SetAvailability("n3", legion.AvailabilityPause)
	c.Fail("db-0-1", "killed")
	c.Run(2 * time.Second)
	live := c.Live("db")
	want := "no node can run it: 2 nodes are not the node holding its volume, n3, 1 node is paused"
	if len(live) != 1 || live[0].Status.Message != want {
		t.Fatalf("%v, want %q", describeTasks(live), want)
	}
}

// changingDB is three nodes running the three ordinals of db on db:1,
// planned once after db was changed to replicas running image.
func changingDB(t *testing.T, replicas, image string) *schedtest.Cluster {
	t.Helper()
	c := schedtest.WithNodes(t, 3)
	c.ApplyAndConverge(db("3", "db:1", "1Gi"))
	c.Apply(db(replicas, image, "1Gi"))
	c.Plan()
	return c
}

func TestStatefulShrinksFromTheHighestOrdinalOneAtATime(t *testing.T) {
	t.Parallel()
	c := changingDB(t, "1", "db:1")
	var stopping []string
	for _, tk := range c.OwnerTasks("db") {
		if tk.Spec.DesiredState == legion.TaskShutdown {
			stopping = append(stopping, tk.Metadata.Name)
		}
	}
	if !cmp.Equal(stopping, []string{"db-2-1"}) {
		t.Fatalf("first shrink step stops %v, want only db-2-1", stopping)
	}
	c.Converge()
	if got := schedtest.SortedNames(c.OwnerTasks("db")); !cmp.Equal(got, []string{"db-0-1"}) {
		t.Fatalf("after shrinking: %v", got)
	}
	if len(c.Volumes) != 3 {
		t.Fatalf("volumes of ordinals no longer wanted must be kept: %d left", len(c.Volumes))
	}
}

func TestStatefulUpdatesFromTheHighestDownStopFirst(t *testing.T) {
	t.Parallel()
	c := changingDB(t, "3", "db:2")
	var order []string
	seen := map[string]bool{}
	for i := 0; i < 60; i++ {
		for _, tk := range c.Live("db") {
			if tk.Spec.Pod.Containers[0].Image == "db:2" && !seen[tk.Spec.Hostname] {
				seen[tk.Spec.Hostname] = true
				order = append(order, tk.Spec.Hostname)
			}
			// Stop-first: never two live tasks meant to run in one ordinal.
		}
		perSlot := map[int]int{}
		for _, tk := range c.OwnerTasks("db") {
			if !tk.Status.State.Terminal() {
				perSlot[tk.Spec.Slot]++
				if perSlot[tk.Spec.Slot] > 1 {
					t.Fatalf("two live tasks in ordinal %d: stateful updates stop first", tk.Spec.Slot)
				}
			}
		}
		c.Advance(time.Second)
		c.Step()
	}
	if diff := cmp.Diff([]string{"db-2", "db-1", "db-0"}, order); diff != "" {
		t.Fatalf("update order (-want +got):\n%s", diff)
	}
}

func TestStatefulClaimResize(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	c.ApplyAndConverge(db("1", "db:1", "1Gi"))
	c.Apply(db("1", "db:1", "2Gi"))
	r := c.Plan()
	if len(r.UpdateVolumes) != 1 || r.UpdateVolumes[0].Spec.Size != 2<<30 {
		t.Fatalf("claim resize: %+v", r.UpdateVolumes)
	}
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestStatefulUpdateNamesItsSnapshot(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	spec := func(img string) string {
		return strings.Replace(db("1", img, "1Gi"), "  mode: stateful", "  mode: stateful\n  update: {snapshot: true}", 1)
	}
	c.ApplyAndConverge(spec("db:1"))
	c.Apply(spec("db:2"))
	c.Plan()
	s := c.Service("db")
	if u := s.Status.Update; u == nil || u.Snapshot != "legion-update-2" {
		t.Fatalf("update status %+v, want snapshot legion-update-2 (generation 2)", u)
	}
}
