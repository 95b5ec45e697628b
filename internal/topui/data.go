package topui

import (
	"time"

	"github.com/legionbsd/legion"
)

// Data is one reading of the cluster: every kind listed, the usage
// reports and the recent events. A kind the caller may not list is in
// Denied with the refusal instead.
type Data struct {
	Now      time.Time
	Objects  map[legion.Kind][]legion.Object
	Denied   map[legion.Kind]string
	Usage    []legion.Usage
	Events   []legion.Event
	Note     map[string]string // a view that could not be read: why (usage, events)
	Managers []Manager
	// SecretSizes keeps each Secret's value size (namespace/name); the
	// value itself is dropped as it arrives (DropSecretValues).
	SecretSizes map[string]int
}

// Manager is a member of the Raft configuration, as the header shows it.
type Manager struct {
	Name   string
	Leader bool
	State  string // Leader, Reachable, Unreachable
}

// Kinds are the kinds legion top lists.
var Kinds = []legion.Kind{legion.KindNode, legion.KindService, legion.KindJob, legion.KindCronJob, legion.KindTask,
	legion.KindVolume, legion.KindRoute, legion.KindNetworkPolicy, legion.KindNamespace, legion.KindSecret,
	legion.KindConfig, legion.KindRoleBinding}

// DropSecretValues forgets every Secret's value, keeping its size.
func (d *Data) DropSecretValues() {
	if d.SecretSizes == nil {
		d.SecretSizes = map[string]int{}
	}
	for _, o := range d.Objects[legion.KindSecret] {
		s, ok := o.(*legion.Secret)
		if !ok {
			continue
		}
		d.SecretSizes[s.Metadata.Namespace+"/"+s.Metadata.Name] = len(s.Spec.Data) + len(s.Spec.Text)
		s.Spec.Data, s.Spec.Text = nil, ""
	}
}

func of[T legion.Object](d *Data, k legion.Kind) []T {
	var out []T
	for _, o := range d.Objects[k] {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Totals is what every task uses and what every node can allocate.
type Totals struct {
	CPU, CPUAllocatable       legion.CPU
	Memory, MemoryAllocatable legion.Bytes
}

func (d *Data) totals() Totals {
	var t Totals
	for _, n := range Nodes(of[*legion.Node](d, legion.KindNode), of[*legion.Task](d, legion.KindTask), d.Usage) {
		t.CPU += n.CPU
		t.Memory += n.Memory
		t.CPUAllocatable += n.CPUAllocatable
		t.MemoryAllocatable += n.MemoryAllocatable
	}
	return t
}

// sample is one point of the header's graph.
type sample struct {
	at     time.Time
	cpu    legion.CPU
	memory legion.Bytes
}

// graphSpan is how far back the header's graph reaches.
const graphSpan = 20 * time.Minute

// graphFloor keeps the graph's scale at least this share of the nodes'
// allocatable, so idle noise stays flat.
const graphFloor = 0.02
