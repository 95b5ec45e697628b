package compose

import (
	"slices"
	"strconv"
	"strings"

	"github.com/legionbsd/legion"
)

// Op is what a step of a plan does.
type Op string

// Plan operations.
const (
	OpApply  Op = "apply"
	OpDelete Op = "delete"
)

// Step is one write of a plan: apply Object, or delete the object named by
// Kind, Namespace and Name.
type Step struct {
	Op        Op
	Kind      legion.Kind
	Namespace string
	Name      string
	Object    legion.Object // for OpApply
}

// Ref names an object of the cluster.
type Ref struct {
	Kind      legion.Kind
	Namespace string
	Name      string
}

func refOf(o legion.Object) Ref {
	m := o.GetMetadata()
	return Ref{Kind: o.GetKind(), Namespace: m.Namespace, Name: m.Name}
}

// InStack reports whether an object belongs to the stack.
func InStack(o legion.Object, stack string) bool {
	return o.GetMetadata().Labels[StackLabel] == stack
}

// PlanDeploy lists the writes that deploy a converted stack: every object
// applied, in apply order; with prune, then every Service and Job of the
// stack the cluster has (current) and the file no longer does deleted. A
// Job applied again unchanged is left as it is (its tasks do not run
// again); a finished one changed is refused by the cluster, naming it.
func PlanDeploy(stack string, desired, current []legion.Object, prune bool) []Step {
	steps := make([]Step, 0, len(desired))
	for _, o := range desired {
		r := refOf(o)
		steps = append(steps, Step{Op: OpApply, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, Object: o})
	}
	if !prune {
		return steps
	}
	for _, r := range Left(stack, desired, current) {
		steps = append(steps, Step{Op: OpDelete, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	return steps
}

// Left are the stack's Services and Jobs among current that desired no
// longer has, in the namespaces desired deploys to, in the order a prune
// deletes them: what deploy --prune deletes, and what a deploy without
// it leaves running. A compose service turned from a service into a job
// (or back) is among them in its old kind. A CronJob's Jobs carry no
// stack label, so none of them is.
func Left(stack string, desired, current []legion.Object) []Ref {
	want := map[Ref]bool{}
	namespaces := map[string]bool{}
	for _, o := range desired {
		want[refOf(o)] = true
		namespaces[o.GetMetadata().Namespace] = true
	}
	var gone []Step
	for _, o := range current {
		r := refOf(o)
		if !slices.Contains(DeployedKinds(), r.Kind) || !InStack(o, stack) || want[r] || !namespaces[r.Namespace] {
			continue
		}
		gone = append(gone, Step{Op: OpDelete, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	sortSteps(gone)
	out := make([]Ref, 0, len(gone))
	for _, g := range gone {
		out = append(out, Ref{Kind: g.Kind, Namespace: g.Namespace, Name: g.Name})
	}
	return out
}

// NamespaceStep returns the apply that creates the stack's namespace when
// the cluster's namespaces (as listed) lack it.
func NamespaceStep(want *legion.Namespace, namespaces []legion.Object) (Step, bool) {
	if want == nil {
		return Step{}, false
	}
	for _, o := range namespaces {
		if o.GetKind() == legion.KindNamespace && o.GetMetadata().Name == want.Metadata.Name {
			return Step{}, false
		}
	}
	return Step{Op: OpApply, Kind: legion.KindNamespace, Name: want.Metadata.Name, Object: want}, true
}

// DeployedKinds are the kinds of what runs of a stack, which deploy
// lists (current) to prune: its Services and Jobs.
func DeployedKinds() []legion.Kind { return []legion.Kind{legion.KindService, legion.KindJob} }

// removeOrder is the order stack rm deletes kinds in: the Services and
// Jobs first, as they use the rest. Volumes are kept: they hold data.
var removeOrder = []legion.Kind{legion.KindService, legion.KindJob, legion.KindNetworkPolicy, legion.KindSecret, legion.KindConfig}

// RemoveKinds are the kinds stack rm deletes, in order.
func RemoveKinds() []legion.Kind { return slices.Clone(removeOrder) }

// PlanRemove lists the deletes that remove a stack from what the cluster
// has: its Services, Jobs, NetworkPolicies, Secrets and Configs; its
// Volumes stay.
func PlanRemove(stack string, current []legion.Object) []Step {
	var steps []Step
	for _, o := range current {
		r := refOf(o)
		if !InStack(o, stack) || !slices.Contains(removeOrder, r.Kind) {
			continue
		}
		steps = append(steps, Step{Op: OpDelete, Kind: r.Kind, Namespace: r.Namespace, Name: r.Name})
	}
	sortSteps(steps)
	return steps
}

func sortSteps(steps []Step) {
	rank := func(k legion.Kind) int {
		if i := slices.Index(removeOrder, k); i >= 0 {
			return i
		}
		return len(removeOrder)
	}
	slices.SortStableFunc(steps, func(a, b Step) int {
		if d := rank(a.Kind) - rank(b.Kind); d != 0 {
			return d
		}
		if d := strings.Compare(a.Namespace, b.Namespace); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
}

// StackSummary is one stack as stack ls shows it.
type StackSummary struct {
	Name      string
	Namespace string
	// Services counts the compose file's services, those deployed as
	// Jobs (a job mode) too, as docker stack ls counts them.
	Services int
}

// Stacks groups Services and Jobs by their stack label, by name then
// namespace.
func Stacks(services []legion.Object) []StackSummary {
	type key struct{ name, ns string }
	count := map[key]int{}
	for _, o := range services {
		stack, ok := o.GetMetadata().Labels[StackLabel]
		if k := o.GetKind(); !ok || k != legion.KindService && k != legion.KindJob {
			continue
		}
		count[key{stack, o.GetMetadata().Namespace}]++
	}
	out := make([]StackSummary, 0, len(count))
	for k, n := range count {
		out = append(out, StackSummary{Name: k.name, Namespace: k.ns, Services: n})
	}
	slices.SortFunc(out, func(a, b StackSummary) int {
		if d := strings.Compare(a.Name, b.Name); d != 0 {
			return d
		}
		return strings.Compare(a.Namespace, b.Namespace)
	})
	return out
}

// ServiceSummary is one Service as stack services and get show it.
type ServiceSummary struct {
	Name string
	Mode legion.ServiceMode
	// Replicas is ready/wanted, or ready for global services: ready, not
	// running, so crash-looping replicas do not count; slots whose task
	// ran to completion (a one-shot) are said apart, as docker service
	// ls says a job's: 0/1 (1 complete).
	Replicas string
	Image    string
	Ports    string // published ports: 8080->80/tcp, comma separated
	Update   string // the last update's state; empty without one
}

// Summarize is a Service as a row of a table.
func Summarize(svc *legion.Service) ServiceSummary {
	s := ServiceSummary{Name: svc.Metadata.Name, Mode: svc.Spec.Mode}
	if svc.Spec.Mode == legion.ModeGlobal {
		s.Replicas = itoa(svc.Status.Ready)
	} else {
		s.Replicas = itoa(svc.Status.Ready) + "/" + itoa(svc.WantedReplicas())
	}
	if n := svc.Status.Complete; n > 0 {
		s.Replicas += " (" + itoa(n) + " complete)"
	}
	if len(svc.Spec.Pod.Containers) > 0 {
		s.Image = svc.Spec.Pod.Containers[0].Image
	}
	var ports []string
	for _, p := range svc.Spec.Endpoint.Ports {
		if p.Publish == "" {
			continue
		}
		text := itoa(p.PublishedPort) + "->" + p.TargetPort.String() + "/" + string(p.Protocol)
		if p.Publish == legion.PublishHost {
			text += " (host)"
		}
		ports = append(ports, text)
	}
	s.Ports = strings.Join(ports, ", ")
	if u := svc.Status.Update; u != nil {
		s.Update = string(u.State)
	}
	return s
}

// Services summarises the stack's Services, by name.
func Services(stack string, objs []legion.Object) []ServiceSummary {
	var out []ServiceSummary
	for _, o := range objs {
		svc, ok := o.(*legion.Service)
		if !ok || !InStack(o, stack) {
			continue
		}
		out = append(out, Summarize(svc))
	}
	slices.SortFunc(out, func(a, b ServiceSummary) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }
