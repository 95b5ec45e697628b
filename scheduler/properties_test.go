package scheduler_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler"
	"github.com/legionbsd/legion/scheduler/schedtest"
	"pgregory.net/rapid"
)

// TestMain runs each property 2,000 times unless -rapid.checks says
// otherwise: five properties make the 10,000 cases CI asks for.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set && os.Getenv("RAPID_CHECKS") == "" {
		if err := flag.Set("rapid.checks", "2000"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// genCluster draws a small random cluster: nodes with zones and sizes, an
// optional quota, and a few services and a job.
func genCluster(t *rapid.T) *schedtest.Cluster {
	c := schedtest.New(t)
	nodes := rapid.IntRange(1, 5).Draw(t, "nodes")
	for i := 1; i <= nodes; i++ {
		zone := rapid.SampledFrom([]string{"a", "b", ""}).Draw(t, "zone")
		opts := []schedtest.NodeOption{schedtest.Resources(rapid.SampledFrom([]string{"1", "2", "4"}).Draw(t, "cpu"), "4Gi")}
		if zone != "" {
			opts = append(opts, schedtest.Labels("zone", zone))
		}
		c.AddNode("n"+strconv.Itoa(i), opts...)
	}
	if rapid.Bool().Draw(t, "quota") {
		cpu, _ := legion.ParseCPU(rapid.SampledFrom([]string{"1", "2", "3"}).Draw(t, "quotaCPU"))
		tasks := rapid.IntRange(1, 8).Draw(t, "quotaTasks")
		ns := &legion.Namespace{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNamespace,
			Metadata: legion.Metadata{Name: "default"}}, Spec: legion.NamespaceSpec{Quota: &legion.Quota{CPU: &cpu, Tasks: &tasks}}}
		admit(t, ns)
		c.Store(ns)
	}
	services := rapid.IntRange(1, 3).Draw(t, "services")
	for i := 1; i <= services; i++ {
		c.Store(genService(t, "s"+strconv.Itoa(i), 1))
	}
	if rapid.Bool().Draw(t, "job") {
		j := &legion.Job{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindJob,
			Metadata: legion.Metadata{Name: "j"}},
			Spec: legion.JobSpec{Completions: rapid.IntRange(1, 4).Draw(t, "completions"), Parallelism: rapid.IntRange(1, 2).Draw(t, "jobPar"),
				Pod: legion.PodSpec{Containers: []legion.Container{{Name: "c", Image: "job:1"}}}}}
		admit(t, j)
		c.Store(j)
	}
	return c
}

func admit(t *rapid.T, o legion.Object) {
	if err := legion.Admit(o); err != nil {
		t.Fatalf("admitting %s: %v", o.GetMetadata().Name, err)
	}
}

func genService(t *rapid.T, name string, image int) *legion.Service {
	s := &legion.Service{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindService,
		Metadata: legion.Metadata{Name: name}}}
	s.Spec.Mode = rapid.SampledFrom([]legion.ServiceMode{legion.ModeReplicated, legion.ModeReplicated, legion.ModeGlobal}).Draw(t, "mode")
	if s.Spec.Mode == legion.ModeReplicated {
		r := rapid.IntRange(0, 5).Draw(t, "replicas")
		s.Spec.Replicas = &r
	}
	cpu := legion.CPU(rapid.SampledFrom([]int{0, 250, 500, 1000}).Draw(t, "request"))
	s.Spec.Pod.Containers = []legion.Container{{Name: "c", Image: "img:" + strconv.Itoa(image),
		Resources: legion.Resources{Requests: legion.ResourceRequests{CPU: cpu}}}}
	s.Spec.Update.Order = rapid.SampledFrom([]legion.UpdateOrder{legion.StopFirst, legion.StartFirst}).Draw(t, "order")
	par := rapid.IntRange(0, 2).Draw(t, "parallelism")
	s.Spec.Update.Parallelism = &par
	if mu := rapid.IntRange(-1, 1).Draw(t, "maxUnavailable"); mu >= 0 {
		s.Spec.Update.MaxUnavailable = &mu
	}
	if rapid.Bool().Draw(t, "spread") {
		s.Spec.Placement.Preferences = []legion.Preference{{Spread: "node.labels.zone"}}
	}
	admit(t, s)
	return s
}

// invariants checks what must hold after every pass, given the state the
// pass started from and the store after its writes.
type invariant func(t *rapid.T, before scheduler.State, c *schedtest.Cluster, r scheduler.Result)

// simulate runs random events on a random cluster, checking inv after
// every plan pass; it returns the cluster for checks at the end.
func simulate(t *rapid.T, inv invariant) *schedtest.Cluster {
	c := genCluster(t)
	names := slices.Sorted(func(yield func(string) bool) {
		for _, s := range c.Services {
			if !yield(s.Metadata.Name) {
				return
			}
		}
	})
	nodes := slices.Sorted(func(yield func(string) bool) {
		for n := range c.Nodes {
			if !yield(n) {
				return
			}
		}
	})
	image := 1
	pass := func() bool {
		c.Heartbeat()
		st := c.State()
		r := scheduler.Plan(st, c.Now)
		c.Write(r)
		inv(t, st, c, r)
		a := c.Agents()
		return !r.Empty() || a
	}
	events := rapid.IntRange(1, 12).Draw(t, "events")
	for e := 0; e < events; e++ {
		switch rapid.IntRange(0, 7).Draw(t, "event") {
		case 0: // an update
			image++
			old := c.Service(rapid.SampledFrom(names).Draw(t, "svc"))
			s := *old
			s.Spec.Pod.Containers = slices.Clone(s.Spec.Pod.Containers)
			s.Spec.Pod.Containers[0].Image = "img:" + strconv.Itoa(image)
			c.Store(&s)
		case 1: // scaling
			old := c.Service(rapid.SampledFrom(names).Draw(t, "svc"))
			if old.Spec.Mode == legion.ModeReplicated {
				s := *old
				r := rapid.IntRange(0, 5).Draw(t, "replicas")
				s.Spec.Replicas = &r
				c.Store(&s)
			}
		case 2:
			n := rapid.SampledFrom(nodes).Draw(t, "node")
			c.Silent[n] = !c.Silent[n]
		case 3:
			c.SetAvailability(rapid.SampledFrom(nodes).Draw(t, "node"),
				rapid.SampledFrom([]legion.Availability{legion.AvailabilityActive, legion.AvailabilityDrain, legion.AvailabilityPause}).Draw(t, "availability"))
		case 4: // a task fails
			var live []string
			for _, tk := range c.Tasks {
				if tk.Status.State == legion.TaskRunning && tk.Metadata.Namespace == "default" {
					live = append(live, tk.Metadata.Name)
				}
			}
			if len(live) > 0 {
				slices.Sort(live)
				c.Fail(rapid.SampledFrom(live).Draw(t, "task"), "exit status 1")
			}
		case 5: // readiness comes and goes
			c.Ready = rapid.Bool().Draw(t, "ready")
		default:
			c.Advance(time.Duration(rapid.IntRange(1, 20).Draw(t, "seconds")) * time.Second)
		}
		for i := 0; i < rapid.IntRange(1, 4).Draw(t, "passes"); i++ {
			pass()
		}
	}
	c.Ready = true
	for i := 0; ; i++ {
		if !pass() {
			break
		}
		if i == 300 {
			t.Fatalf("no convergence after 300 passes: %s", schedtest.Describe(c.Last))
		}
	}
	return c
}

func TestPropertyAtMostOneCurrentTaskPerSlot(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		simulate(t, func(t *rapid.T, _ scheduler.State, c *schedtest.Cluster, _ scheduler.Result) {
			current := map[string]int{}
			for _, tk := range c.Tasks {
				if tk.Status.State.Terminal() || tk.Spec.DesiredState != legion.TaskRunning {
					continue
				}
				if n := c.Nodes[tk.Spec.Node]; n != nil && n.Spec.Availability == legion.AvailabilityDrain {
					continue // being moved off
				}
				if s := c.Services["default/"+tk.Spec.Owner.Name]; s != nil && !reflect.DeepEqual(tk.Spec.Pod, s.Spec.Pod) {
					continue // outdated
				}
				k := fmt.Sprintf("%s/%d/%s", tk.Spec.Owner.Name, tk.Spec.Slot, globalNode(c, tk))
				current[k]++
				if current[k] > 1 {
					t.Fatalf("slot %s has %d current tasks", k, current[k])
				}
			}
		})
	})
}

func globalNode(c *schedtest.Cluster, tk *legion.Task) string {
	if s := c.Services["default/"+tk.Spec.Owner.Name]; s != nil && s.Spec.Mode == legion.ModeGlobal {
		return tk.Spec.Node
	}
	return ""
}

func TestPropertyQuotaNeverExceeded(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		simulate(t, func(t *rapid.T, _ scheduler.State, c *schedtest.Cluster, _ scheduler.Result) {
			ns := c.Namespaces["default"]
			if ns == nil || ns.Spec.Quota == nil {
				return
			}
			var cpu legion.CPU
			tasks := 0
			for _, tk := range c.Tasks {
				if tk.Spec.Placed == nil || tk.Status.State.Terminal() {
					continue
				}
				cpu += tk.Spec.Pod.Requests().CPU
				tasks++
			}
			if q := ns.Spec.Quota; cpu > *q.CPU || tasks > *q.Tasks {
				t.Fatalf("placed tasks take cpu %s in %d tasks, over the quota cpu %s tasks %d", cpu, tasks, q.CPU, *q.Tasks)
			}
		})
	})
}

func TestPropertyVoluntaryDisruptionsWithinMaxUnavailable(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		simulate(t, func(t *rapid.T, before scheduler.State, c *schedtest.Cluster, _ scheduler.Result) {
			for _, s := range before.Services {
				mu := s.Spec.Update.MaxUnavailable
				if mu == nil || s.Spec.Mode != legion.ModeReplicated {
					continue
				}
				want := s.WantedReplicas()
				if s.Spec.Autoscale != nil {
					continue
				}
				// readyBefore: the node each ready slot ran on.
				readyBefore := map[int]string{}
				for _, tk := range before.Tasks {
					if tk.Spec.Owner.Name == s.Metadata.Name && tk.Spec.DesiredState == legion.TaskRunning &&
						tk.Status.State == legion.TaskRunning && tk.Status.Ready {
						readyBefore[tk.Spec.Slot] = tk.Spec.Node
					}
				}
				// A slot whose node went down in the pass was lost, not taken:
				// its task is orphaned, and may be pruned from the slot's
				// history in the same pass (the oldest of its ended tasks).
				lost := func(node string) bool {
					n := c.Nodes[node]
					return n == nil || n.Status.State == legion.NodeDown
				}
				readyAfter := map[int]bool{}
				orphaned := map[int]bool{}
				for _, tk := range c.Tasks {
					if tk.Spec.Owner.Name != s.Metadata.Name {
						continue
					}
					if tk.Spec.DesiredState == legion.TaskRunning && tk.Status.State == legion.TaskRunning && tk.Status.Ready {
						readyAfter[tk.Spec.Slot] = true
					}
					if tk.Status.State == legion.TaskOrphaned {
						orphaned[tk.Spec.Slot] = true
					}
				}
				unavailable, disrupted := 0, 0
				for slot := 1; slot <= want; slot++ {
					node, ready := readyBefore[slot]
					if !ready {
						unavailable++
					} else if !readyAfter[slot] && !orphaned[slot] && !lost(node) {
						disrupted++
					}
				}
				if disrupted > 0 && unavailable+disrupted > *mu {
					t.Fatalf("service %s: %d slots taken away with %d already unavailable, maxUnavailable %d",
						s.Metadata.Name, disrupted, unavailable, *mu)
				}
			}
		})
	})
}

func TestPropertySameInputSameOutput(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		simulate(t, func(t *rapid.T, before scheduler.State, c *schedtest.Cluster, r scheduler.Result) {
			// The same snapshot, with every list reversed.
			st := before
			st.Services = reversed(st.Services)
			st.Tasks = reversed(st.Tasks)
			st.Nodes = reversed(st.Nodes)
			st.Jobs = reversed(st.Jobs)
			snapshot, err := json.Marshal(st)
			if err != nil {
				t.Fatalf("%v", err)
			}
			again := scheduler.Plan(st, c.Now)
			if after, _ := json.Marshal(st); string(after) != string(snapshot) {
				t.Fatalf("Plan changed its input")
			}
			if !reflect.DeepEqual(stripVersions(r), stripVersions(again)) {
				t.Fatalf("same input, different output:\n%s\n%s", schedtest.Describe(r), schedtest.Describe(again))
			}
		})
	})
}

func reversed[T any](s []T) []T {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// stripVersions renders a result for comparison: the harness stamps
// versions on the objects it stores after the first plan.
func stripVersions(r scheduler.Result) string {
	return fmt.Sprintf("%s|%v", schedtest.Describe(r), r.NextWake)
}

func TestPropertyConvergedStateWritesNothing(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		c := simulate(t, func(*rapid.T, scheduler.State, *schedtest.Cluster, scheduler.Result) {})
		if r := scheduler.Plan(c.State(), c.Now); !r.Empty() {
			t.Fatalf("converged state still writes: %s", schedtest.Describe(r))
		}
	})
}

// TestPropertyArbitraryTasks feeds the planner tasks in any state, of
// owners and nodes that may not exist, in slots out of range: it must not
// panic, must give the same output twice, and must never create a task
// whose name is taken.
func TestPropertyArbitraryTasks(t *testing.T) {
	t.Parallel()
	states := []legion.TaskState{"", legion.TaskPending, legion.TaskAssigned, legion.TaskRunning, legion.TaskComplete,
		legion.TaskFailed, legion.TaskRejected, legion.TaskShutdown, legion.TaskOrphaned}
	rapid.Check(t, func(t *rapid.T) {
		c := genCluster(t)
		now := c.Now
		for i := rapid.IntRange(0, 15).Draw(t, "tasks"); i > 0; i-- {
			owner := rapid.SampledFrom([]string{"s1", "s2", "s3", "j", "gone"}).Draw(t, "owner")
			kind := legion.KindService
			if owner == "j" {
				kind = legion.KindJob
			}
			slot := rapid.IntRange(-1, 7).Draw(t, "slot")
			tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
				Metadata: legion.Metadata{Namespace: "default",
					Name: owner + "-" + strconv.Itoa(slot) + "-" + strconv.Itoa(rapid.IntRange(1, 9).Draw(t, "num"))}},
				Spec: legion.TaskSpec{Owner: legion.Owner{Kind: kind, Name: owner}, Slot: slot,
					Node:         rapid.SampledFrom([]string{"", "n1", "n2", "nowhere"}).Draw(t, "node"),
					DesiredState: rapid.SampledFrom([]legion.TaskState{legion.TaskRunning, legion.TaskShutdown, legion.TaskComplete}).Draw(t, "desired"),
					PodHash:      rapid.SampledFrom([]string{"", "x"}).Draw(t, "hash")},
				Status: legion.TaskStatus{State: rapid.SampledFrom(states).Draw(t, "state"), Ready: rapid.Bool().Draw(t, "ready"),
					Timestamp: now.Add(-time.Duration(rapid.IntRange(0, 100).Draw(t, "age")) * time.Second)}}
			if tk.Spec.Node != "" && rapid.Bool().Draw(t, "placed") {
				tk.Spec.Placed = &now
			}
			if _, dup := c.Tasks["default/"+tk.Metadata.Name]; !dup {
				c.Tasks["default/"+tk.Metadata.Name] = tk
			}
		}
		st := c.State()
		r := scheduler.Plan(st, now)
		if again := scheduler.Plan(st, now); stripVersions(r) != stripVersions(again) {
			t.Fatalf("same input, different output")
		}
		for _, tk := range r.CreateTasks {
			if _, taken := c.Tasks["default/"+tk.Metadata.Name]; taken {
				t.Fatalf("created task %s, whose name is taken", tk.Metadata.Name)
			}
		}
		c.Write(r)
	})
}
