package compose

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/legionbsd/legion"
)

func obj(kind legion.Kind, ns, name, stack string) legion.Object {
	o, err := legion.New(kind)
	if err != nil {
		panic(err)
	}
	m := o.GetMetadata()
	m.Namespace, m.Name = ns, name
	if stack != "" {
		m.Labels = map[string]string{StackLabel: stack}
	}
	return o
}

// steps drops the objects of apply steps, which the tests name by ref.
func steps(in []Step) []Step {
	out := make([]Step, len(in))
	for i, s := range in {
		s.Object = nil
		out[i] = s
	}
	return out
}

func TestPlanDeploy(t *testing.T) {
	t.Parallel()
	desired := []legion.Object{
		obj(legion.KindSecret, "shop", "db-password", "shop"),
		obj(legion.KindService, "shop", "db", "shop"),
		obj(legion.KindService, "shop", "web", "shop"),
		obj(legion.KindJob, "shop", "migrate", "shop"),
		obj(legion.KindJob, "shop", "report", "shop"),
	}
	current := []legion.Object{
		obj(legion.KindService, "shop", "web", "shop"),        // still in the file
		obj(legion.KindService, "shop", "old-worker", "shop"), // gone from the file
		obj(legion.KindService, "shop", "admin", "other"),     // another stack's
		obj(legion.KindService, "shop", "manual", ""),         // applied by hand
		obj(legion.KindService, "prod", "cron", "shop"),       // the same stack name elsewhere
		obj(legion.KindSecret, "shop", "old-secret", "shop"),  // prune deletes Services and Jobs only
		obj(legion.KindVolume, "shop", "old-data", "shop"),
		obj(legion.KindJob, "shop", "migrate", "shop"),      // still in the file
		obj(legion.KindJob, "shop", "seed", "shop"),         // gone from the file
		obj(legion.KindService, "shop", "report", "shop"),   // a service the file makes a job now
		obj(legion.KindJob, "shop", "nightly-29000000", ""), // a CronJob's
	}
	applies := []Step{
		{Op: OpApply, Kind: legion.KindSecret, Namespace: "shop", Name: "db-password"},
		{Op: OpApply, Kind: legion.KindService, Namespace: "shop", Name: "db"},
		{Op: OpApply, Kind: legion.KindService, Namespace: "shop", Name: "web"},
		{Op: OpApply, Kind: legion.KindJob, Namespace: "shop", Name: "migrate"},
		{Op: OpApply, Kind: legion.KindJob, Namespace: "shop", Name: "report"},
	}
	tests := []struct {
		name  string
		prune bool
		want  []Step
	}{
		{"without prune", false, applies},
		{"with prune", true, append(append([]Step{}, applies...),
			Step{Op: OpDelete, Kind: legion.KindService, Namespace: "shop", Name: "old-worker"},
			Step{Op: OpDelete, Kind: legion.KindService, Namespace: "shop", Name: "report"},
			Step{Op: OpDelete, Kind: legion.KindJob, Namespace: "shop", Name: "seed"})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PlanDeploy("shop", desired, current, tt.prune)
			if diff := cmp.Diff(tt.want, steps(got)); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
			for _, s := range got {
				if s.Op == OpApply && s.Object == nil {
					t.Errorf("apply of %s/%s has no object", s.Kind, s.Name)
				}
			}
		})
	}
}

func TestPlanRemove(t *testing.T) {
	t.Parallel()
	current := []legion.Object{
		obj(legion.KindConfig, "shop", "nginx-conf", "shop"),
		obj(legion.KindVolume, "shop", "db-data", "shop"),
		obj(legion.KindSecret, "shop", "db-password", "shop"),
		obj(legion.KindService, "shop", "web", "shop"),
		obj(legion.KindService, "shop", "db", "shop"),
		obj(legion.KindNetworkPolicy, "shop", "default", "shop"),
		obj(legion.KindService, "shop", "admin", "other"),
		obj(legion.KindSecret, "shop", "manual", ""),
		obj(legion.KindJob, "shop", "migrate", "shop"),
	}
	want := []Step{
		{Op: OpDelete, Kind: legion.KindService, Namespace: "shop", Name: "db"},
		{Op: OpDelete, Kind: legion.KindService, Namespace: "shop", Name: "web"},
		{Op: OpDelete, Kind: legion.KindJob, Namespace: "shop", Name: "migrate"},
		{Op: OpDelete, Kind: legion.KindNetworkPolicy, Namespace: "shop", Name: "default"},
		{Op: OpDelete, Kind: legion.KindSecret, Namespace: "shop", Name: "db-password"},
		{Op: OpDelete, Kind: legion.KindConfig, Namespace: "shop", Name: "nginx-conf"},
	}
	if diff := cmp.Diff(want, PlanRemove("shop", current)); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if got := PlanRemove("absent", current); len(got) != 0 {
		t.Errorf("removing a stack with nothing deployed plans %v", got)
	}
}

func TestStacksAndServices(t *testing.T) {
	t.Parallel()
	web := obj(legion.KindService, "shop", "web", "shop").(*legion.Service)
	three := 3
	web.Spec = legion.ServiceSpec{Mode: legion.ModeReplicated, Replicas: &three,
		Pod: legion.PodSpec{Containers: []legion.Container{{Name: "web", Image: "nginx:1.25"}}},
		Endpoint: legion.Endpoint{Ports: []legion.ServicePort{
			{Protocol: legion.TCP, Port: 80, TargetPort: legion.PortRef{Number: 80}, Publish: legion.PublishIngress, PublishedPort: 8080},
			{Protocol: legion.TCP, Port: 9090, TargetPort: legion.PortRef{Number: 9090}},
			{Protocol: legion.UDP, Port: 53, TargetPort: legion.PortRef{Number: 53}, Publish: legion.PublishHost, PublishedPort: 5353},
		}}}
	web.Status.Running, web.Status.Ready = 3, 2 // one crash-looping
	web.Status.Update = &legion.UpdateStatus{State: legion.UpdatePaused}
	agent := obj(legion.KindService, "shop", "agent", "shop").(*legion.Service)
	agent.Spec = legion.ServiceSpec{Mode: legion.ModeGlobal, Pod: legion.PodSpec{Containers: []legion.Container{{Name: "agent", Image: "agent:5"}}}}
	agent.Status.Running, agent.Status.Ready = 4, 4
	objs := []legion.Object{web, agent,
		obj(legion.KindService, "prod", "api", "shop"),
		obj(legion.KindService, "tools", "gitea", "git"),
		obj(legion.KindService, "tools", "manual", ""),
	}
	wantStacks := []StackSummary{{Name: "git", Namespace: "tools", Services: 1}, {Name: "shop", Namespace: "prod", Services: 1}, {Name: "shop", Namespace: "shop", Services: 2}}
	if diff := cmp.Diff(wantStacks, Stacks(objs)); diff != "" {
		t.Errorf("stacks (-want +got):\n%s", diff)
	}
	wantServices := []ServiceSummary{
		{Name: "agent", Mode: legion.ModeGlobal, Replicas: "4", Image: "agent:5"},
		{Name: "web", Mode: legion.ModeReplicated, Replicas: "2/3", Image: "nginx:1.25", Ports: "8080->80/tcp, 5353->53/udp (host)", Update: "paused"},
	}
	if diff := cmp.Diff(wantServices, Services("shop", objs[:2]), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("services (-want +got):\n%s", diff)
	}
}

func TestNamespaceStep(t *testing.T) {
	t.Parallel()
	want := &legion.Namespace{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNamespace, Metadata: legion.Metadata{Name: "shop"}}}
	if _, ok := NamespaceStep(want, []legion.Object{obj(legion.KindNamespace, "", "shop", "")}); ok {
		t.Error("an existing namespace is made again")
	}
	step, ok := NamespaceStep(want, []legion.Object{obj(legion.KindNamespace, "", "other", "")})
	if !ok {
		t.Fatal("a missing namespace is not made")
	}
	if diff := cmp.Diff(Step{Op: OpApply, Kind: legion.KindNamespace, Name: "shop"}, steps([]Step{step})[0]); diff != "" {
		t.Errorf("step (-want +got):\n%s", diff)
	}
	if step.Object != want {
		t.Error("the step does not apply the wanted namespace")
	}
}

// A one-shot's completed slots are said beside ready/wanted.
func TestSummarizeSaysCompletedSlots(t *testing.T) {
	t.Parallel()
	n := 1
	svc := &legion.Service{Spec: legion.ServiceSpec{Replicas: &n}, Status: legion.ServiceStatus{Complete: 1}}
	if got := Summarize(svc).Replicas; got != "0/1 (1 complete)" {
		t.Errorf("replicas %q, want 0/1 (1 complete)", got)
	}
}
