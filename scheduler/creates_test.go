package scheduler_test

import (
	"fmt"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

// unplaceable is a service whose constraint no node meets: its tasks stay
// pending, so every slot keeps its first task and nothing else changes.
func unplaceable(name string, replicas int) string {
	return fmt.Sprintf(`
apiVersion: legion/v1
kind: Service
metadata: {name: %s}
spec:
  replicas: %d
  placement: {constraints: ["node.labels.zone == nowhere"]}
  pod: {containers: [{name: c, image: localhost/c:1}]}
`, name, replicas)
}

func createdBy(r scheduler.Result) map[string]int {
	out := map[string]int{}
	for _, t := range r.CreateTasks {
		out[t.Spec.Owner.Name]++
	}
	return out
}

// A pass makes at most MaxCreatesPerPass tasks and asks to run again at
// once; the next passes make the rest.
func TestCreatesBoundedPerPass(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	const replicas = 2*scheduler.MaxCreatesPerPass + 100
	c.Apply(unplaceable("big", replicas))
	var perPass []int
	for len(c.OwnerTasks("big")) < replicas && len(perPass) < 10 {
		r := c.Plan()
		perPass = append(perPass, len(r.CreateTasks))
		if len(r.CreateTasks) > scheduler.MaxCreatesPerPass {
			t.Fatalf("pass %d made %d tasks, at most %d allowed", len(perPass), len(r.CreateTasks), scheduler.MaxCreatesPerPass)
		}
		if len(c.OwnerTasks("big")) < replicas && (r.NextWake.IsZero() || r.NextWake.Sub(c.Now) > legion.HeartbeatPeriod) {
			t.Fatalf("pass %d left tasks to make but wakes at %v (now %v)", len(perPass), r.NextWake, c.Now)
		}
	}
	want := []int{scheduler.MaxCreatesPerPass, scheduler.MaxCreatesPerPass, 100}
	if fmt.Sprint(perPass) != fmt.Sprint(want) {
		t.Fatalf("tasks made per pass %v, want %v", perPass, want)
	}
	if r := c.Plan(); !r.Empty() {
		t.Fatalf("once every slot has its task a pass still writes: %s", schedtest.Describe(r))
	}
}

// The bound is shared max-min fairly: small owners get all they want, the
// big ones split the rest evenly, and whoever sorts last is not starved.
func TestCreatesFairAcrossOwners(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.Apply(unplaceable("a-huge", 65536))
	c.Apply(unplaceable("m-small", 7))
	c.Apply(unplaceable("z-big", 3000))
	c.Apply(`
apiVersion: legion/v1
kind: Job
metadata: {name: batch}
spec:
  completions: 40
  parallelism: 40
  placement: {constraints: ["node.labels.zone == nowhere"]}
  pod: {containers: [{name: c, image: localhost/c:1}]}
`)
	r := c.Plan()
	got := createdBy(r)
	rest := scheduler.MaxCreatesPerPass - 7 - 40
	want := map[string]int{"m-small": 7, "batch": 40, "a-huge": (rest + 1) / 2, "z-big": rest / 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tasks made by owner %v, want %v", got, want)
	}
	// The next pass: the small ones are done, the big two share it all.
	got = createdBy(c.Plan())
	want = map[string]int{"a-huge": scheduler.MaxCreatesPerPass / 2, "z-big": scheduler.MaxCreatesPerPass / 2}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("second pass: tasks made by owner %v, want %v", got, want)
	}
	// A service added behind a huge one gets its tasks in the next pass.
	c.Apply(unplaceable("late", 3))
	if got := createdBy(c.Plan()); got["late"] != 3 {
		t.Fatalf("a new small service got %d of its 3 tasks behind a huge one (%v)", got["late"], got)
	}
}

// A deleted service makes nothing more: its pending tasks are stopped and
// deleted in the same pass, however many there are.
func TestDeletedServiceMakesNoTasks(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.Apply(unplaceable("gone", 5000))
	c.Apply(unplaceable("kept", 2))
	c.Plan()
	c.Plan()
	made := len(c.OwnerTasks("gone"))
	if made == 0 || made >= 5000 {
		t.Fatalf("%d tasks before the delete, want some but not all", made)
	}
	c.DeleteService("gone")
	r := c.Plan()
	if n := createdBy(r)["gone"]; n != 0 {
		t.Fatalf("the deleted service got %d new tasks", n)
	}
	deleted := 0
	for _, task := range r.DeleteTasks {
		if task.Spec.Owner.Name == "gone" {
			deleted++
		}
	}
	if deleted != made || len(c.OwnerTasks("gone")) != 0 {
		t.Fatalf("deleted %d of the deleted service's %d pending tasks, %d left", deleted, made, len(c.OwnerTasks("gone")))
	}
	if len(c.OwnerTasks("kept")) != 2 {
		t.Fatalf("the other service has %d tasks, want 2", len(c.OwnerTasks("kept")))
	}
}
