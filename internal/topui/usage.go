// Package topui is legion top: what the cluster's objects and usage
// reports add up to (per node, task and service), and the terminal UI
// over them as a pure model (data and keys in, a new model and a view
// out), so it is tested without a terminal. The command feeds it.
package topui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/legionbsd/legion"
)

// NodeUsage is what a node's tasks use against what it holds.
type NodeUsage struct {
	Name              string              `json:"name"`
	State             legion.NodeState    `json:"state"`
	Availability      legion.Availability `json:"availability"`
	Tasks             int                 `json:"tasks"` // running or starting there
	CPU               legion.CPU          `json:"cpu"`
	CPUAllocatable    legion.CPU          `json:"cpuAllocatable"`
	CPUCapacity       legion.CPU          `json:"cpuCapacity"`
	Memory            legion.Bytes        `json:"memory"`
	MemoryAllocatable legion.Bytes        `json:"memoryAllocatable"`
	MemoryCapacity    legion.Bytes        `json:"memoryCapacity"`
	Reported          bool                `json:"reported"` // some task on it has reported usage
}

// TaskUsage is what a task uses against what it asked for.
type TaskUsage struct {
	Namespace     string           `json:"namespace"`
	Name          string           `json:"name"`
	Owner         string           `json:"owner"` // kind/name
	Node          string           `json:"node"`
	State         legion.TaskState `json:"state"`
	CPU           legion.CPU       `json:"cpu"`
	CPURequest    legion.CPU       `json:"cpuRequest"`
	CPULimit      legion.CPU       `json:"cpuLimit"` // 0: none
	Memory        legion.Bytes     `json:"memory"`
	MemoryRequest legion.Bytes     `json:"memoryRequest"`
	MemoryLimit   legion.Bytes     `json:"memoryLimit"` // 0: none
	Reported      bool             `json:"reported"`
}

// ServiceUsage sums a service's tasks.
type ServiceUsage struct {
	Namespace     string       `json:"namespace"`
	Name          string       `json:"name"`
	Tasks         int          `json:"tasks"` // live tasks summed
	CPU           legion.CPU   `json:"cpu"`
	CPURequest    legion.CPU   `json:"cpuRequest"`
	CPULimit      legion.CPU   `json:"cpuLimit"` // 0: some task has none
	Memory        legion.Bytes `json:"memory"`
	MemoryRequest legion.Bytes `json:"memoryRequest"`
	MemoryLimit   legion.Bytes `json:"memoryLimit"` // 0: some task has none
	Reported      bool         `json:"reported"`    // some task has reported usage
}

// live is a task that holds resources on its node.
func live(t *legion.Task) bool {
	return t.Spec.Node != "" && t.Spec.DesiredState == legion.TaskRunning && !t.Status.State.Terminal()
}

// limits adds up the app containers' limits; a container without one
// leaves the pod without one (0).
func limits(p *legion.PodSpec) (legion.CPU, legion.Bytes) {
	var cpu legion.CPU
	var mem legion.Bytes
	cpuSet, memSet := true, true
	for _, c := range p.Containers {
		l := c.Resources.Limits
		cpuSet = cpuSet && l.CPU > 0
		memSet = memSet && l.Memory > 0
		cpu += l.CPU
		mem += l.Memory
	}
	if !cpuSet {
		cpu = 0
	}
	if !memSet {
		mem = 0
	}
	return cpu, mem
}

type taskKey struct{ ns, name string }

func usageByTask(us []legion.Usage) map[taskKey]legion.Usage {
	out := make(map[taskKey]legion.Usage, len(us))
	for _, u := range us {
		out[taskKey{u.Namespace, u.Task}] = u
	}
	return out
}

// Tasks is each live task's usage against its requests and limits,
// sorted by namespace and name.
func Tasks(tasks []*legion.Task, us []legion.Usage) []TaskUsage {
	by := usageByTask(us)
	var out []TaskUsage
	for _, t := range tasks {
		if !live(t) {
			continue
		}
		req := t.Spec.Pod.Requests()
		cl, ml := limits(&t.Spec.Pod)
		r := TaskUsage{Namespace: t.Metadata.Namespace, Name: t.Metadata.Name, Node: t.Spec.Node, State: t.Status.State,
			CPURequest: req.CPU, CPULimit: cl, MemoryRequest: req.Memory, MemoryLimit: ml}
		if t.Spec.Owner.Name != "" {
			r.Owner = string(t.Spec.Owner.Kind) + "/" + t.Spec.Owner.Name
		}
		if u, ok := by[taskKey{r.Namespace, r.Name}]; ok && u.Node == t.Spec.Node {
			r.CPU, r.Memory, r.Reported = u.CPU, u.Memory, true
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Nodes is each node's tasks' usage against its allocatable and capacity,
// sorted by name.
func Nodes(nodes []*legion.Node, tasks []*legion.Task, us []legion.Usage) []NodeUsage {
	idx := map[string]int{}
	out := make([]NodeUsage, len(nodes))
	for i, n := range nodes {
		res := n.Status.Resources
		out[i] = NodeUsage{Name: n.Metadata.Name, State: n.Status.State, Availability: n.Spec.Availability,
			CPUAllocatable: res.Allocatable.CPU, CPUCapacity: res.Capacity.CPU,
			MemoryAllocatable: res.Allocatable.Memory, MemoryCapacity: res.Capacity.Memory}
		idx[n.Metadata.Name] = i
	}
	for _, t := range Tasks(tasks, us) {
		i, ok := idx[t.Node]
		if !ok {
			continue
		}
		out[i].Tasks++
		if t.Reported {
			out[i].CPU += t.CPU
			out[i].Memory += t.Memory
			out[i].Reported = true
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Services sums each service's live tasks, sorted by namespace and name.
func Services(services []*legion.Service, tasks []*legion.Task, us []legion.Usage) []ServiceUsage {
	idx := map[taskKey]int{}
	out := make([]ServiceUsage, len(services))
	for i, s := range services {
		out[i] = ServiceUsage{Namespace: s.Metadata.Namespace, Name: s.Metadata.Name}
		idx[taskKey{s.Metadata.Namespace, s.Metadata.Name}] = i
	}
	cpuOpen, memOpen := map[int]bool{}, map[int]bool{}
	for _, t := range Tasks(tasks, us) {
		kind, name, _ := strings.Cut(t.Owner, "/")
		i, ok := idx[taskKey{t.Namespace, name}]
		if !ok || kind != string(legion.KindService) {
			continue
		}
		s := &out[i]
		s.Tasks++
		s.Reported = s.Reported || t.Reported
		s.CPU += t.CPU
		s.Memory += t.Memory
		s.CPURequest += t.CPURequest
		s.MemoryRequest += t.MemoryRequest
		s.CPULimit += t.CPULimit
		s.MemoryLimit += t.MemoryLimit
		cpuOpen[i] = cpuOpen[i] || t.CPULimit == 0
		memOpen[i] = memOpen[i] || t.MemoryLimit == 0
	}
	for i := range out {
		if cpuOpen[i] {
			out[i].CPULimit = 0
		}
		if memOpen[i] {
			out[i].MemoryLimit = 0
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Namespace != out[j].Namespace {
			return out[i].Namespace < out[j].Namespace
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// FormatCPU shows cores to a tenth when large, millicores when small.
func FormatCPU(c legion.CPU) string {
	if c >= 1000 {
		return strconv.FormatFloat(float64(c)/1000, 'f', 1, 64)
	}
	return strconv.FormatInt(int64(c), 10) + "m"
}

// FormatBytes shows a byte amount in binary units to a tenth.
func FormatBytes(b legion.Bytes) string {
	n := float64(b)
	for _, u := range []struct {
		s string
		v float64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if n >= u.v {
			v := n / u.v
			if v >= 100 {
				return fmt.Sprintf("%.0f%s", v, u.s)
			}
			return fmt.Sprintf("%.1f%s", v, u.s)
		}
	}
	return strconv.FormatInt(int64(b), 10)
}

// Percent is used as a share of of, "-" when of is zero.
func Percent(used, of int64) string {
	if of <= 0 {
		return "-"
	}
	return strconv.FormatInt(used*100/of, 10) + "%"
}
