package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc/codes"
)

// admitFixture is one initialised manager for the admission tests; each
// case works in a namespace of its own, so they run side by side.
func admitFixture(t *testing.T) (*manager, *client.Client) {
	t.Helper()
	m := newManager(t)
	t.Cleanup(m.stop)
	return m, initCluster(t, m)
}

func applyOK(t *testing.T, c *client.Client, yaml string) {
	t.Helper()
	if _, err := c.Apply(context.Background(), mustParse(t, yaml), client.ApplyOptions{}); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// applyRefused applies yaml, wants it refused with code and a message
// holding every want, and checks that no object of yaml was written (a
// dry run is refused alike).
func applyRefused(t *testing.T, m *manager, c *client.Client, yaml string, code codes.Code, want ...string) {
	t.Helper()
	objs := mustParse(t, yaml)
	versions := storedVersions(t, m, objs)
	for _, dry := range []bool{true, false} {
		_, err := c.Apply(context.Background(), objs, client.ApplyOptions{DryRun: dry})
		if err == nil {
			t.Fatalf("apply (dry run %v) accepted, want refused with %s", dry, code)
		}
		if client.Code(err) != code {
			t.Fatalf("apply (dry run %v): %v (%s), want code %s", dry, err, client.Code(err), code)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Fatalf("refusal %q does not say %q", err, w)
			}
		}
	}
	if after := storedVersions(t, m, mustParse(t, yaml)); !equalVersions(versions, after) {
		t.Fatalf("a refused apply wrote: versions %v, then %v", versions, after)
	}
}

// storedVersions is each object's stored version (0: absent).
func storedVersions(t *testing.T, m *manager, objs []legion.Object) []uint64 {
	t.Helper()
	var out []uint64
	for _, o := range objs {
		md := o.GetMetadata()
		ns := md.Namespace
		if o.GetKind().Namespaced() && ns == "" {
			ns = legion.DefaultNamespace
		}
		cur, _, err := m.s.Store().Get(o.GetKind(), ns, md.Name)
		switch {
		case errors.Is(err, store.ErrNotFound):
			out = append(out, 0)
		case err != nil:
			t.Fatal(err)
		default:
			out = append(out, cur.GetMetadata().Version)
		}
	}
	return out
}

func equalVersions(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func quotaNS(name, quota string) string {
	return "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: " + name + "}\nspec: {quota: " + quota + "}\n"
}

func svcYAML(ns, name, replicas, requests string) string {
	return `apiVersion: legion/v1
kind: Service
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  replicas: ` + replicas + `
  pod: {containers: [{name: c, image: web:1, resources: {requests: ` + requests + `}}]}
`
}

func volYAML(ns, name, spec string) string {
	return "apiVersion: legion/v1\nkind: Volume\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec: " + spec + "\n"
}

func TestAdmissionQuota(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	cases := []struct {
		name, quota, setup, apply string
		want                      []string
	}{
		{name: "cpu", quota: "{cpu: 1, tasks: 10}",
			apply: svcYAML("q-cpu", "web", "5", "{cpu: 600m, memory: 1Mi}"),
			want:  []string{"over the quota of namespace q-cpu: cpu 3 of 1", "Service web"}},
		{name: "memory", quota: "{memory: 1Gi}",
			apply: svcYAML("q-memory", "web", "3", "{cpu: 100m, memory: 512Mi}"),
			want:  []string{"over the quota of namespace q-memory: memory 1536Mi of 1Gi"}},
		{name: "tasks", quota: "{tasks: 2}",
			apply: svcYAML("q-tasks", "web", "3", "{}"),
			want:  []string{"over the quota of namespace q-tasks: tasks 3 of 2"}},
		{name: "volumes", quota: "{volumes: 1}",
			setup: volYAML("q-volumes", "a", "{size: 1Gi}"),
			apply: volYAML("q-volumes", "b", "{size: 1Gi}"),
			want:  []string{"over the quota of namespace q-volumes: volumes 2 of 1", "Volume b"}},
		{name: "storage", quota: "{storage: 5Gi}",
			apply: volYAML("q-storage", "big", "{size: 10Gi}"),
			want:  []string{"over the quota of namespace q-storage: storage 10Gi of 5Gi"}},
		{name: "claims", quota: "{storage: 5Gi, volumes: 5}",
			apply: `apiVersion: legion/v1
kind: Service
metadata: {name: db, namespace: q-claims}
spec:
  mode: stateful
  replicas: 3
  pod:
    containers: [{name: c, image: db:1, volumeMounts: [{name: data, path: /data}]}]
    volumes: [{name: data, claim: {size: 2Gi}}]
`,
			want: []string{"over the quota of namespace q-claims: storage 6Gi of 5Gi"}},
		{name: "no cpu request", quota: "{cpu: 1}",
			apply: svcYAML("q-noreq", "web", "1", "{memory: 1Mi}"),
			want:  []string{"Service q-noreq/web: spec.pod: requests no cpu", "cpu quota (1)"}},
		{name: "no memory request", quota: "{memory: 1Gi}",
			apply: svcYAML("q-nomem", "web", "1", "{cpu: 100m}"),
			want:  []string{"spec.pod: requests no memory", "memory quota (1Gi)"}},
		{name: "volume without size", quota: "{storage: 5Gi}",
			apply: volYAML("q-nosize", "v", "{}"),
			want:  []string{"Volume q-nosize/v: spec.size: missing", "storage quota (5Gi)"}},
		{name: "start-first", quota: "{tasks: 3, cpu: 3}",
			apply: strings.Replace(svcYAML("q-surge", "web", "3", "{cpu: 1}"), "spec:\n", "spec:\n  update: {order: start-first}\n", 1),
			want: []string{"over the quota of namespace q-surge: cpu 4 of 3, tasks 4 of 3",
				"one task more for each that updates start-first"}},
		{name: "autoscaled at max", quota: "{tasks: 3, cpu: 1}",
			apply: autoscaledYAML("q-autoscale", "web", "10"),
			want: []string{"over the quota of namespace q-autoscale: cpu 2 of 1, tasks 10 of 3",
				"autoscaled ones at their autoscale.max, which they may scale to (web: 10)"}},
		{name: "batch together over", quota: "{tasks: 3}",
			apply: svcYAML("q-batch", "a", "2", "{}") + "---\n" + svcYAML("q-batch", "b", "2", "{}"),
			want:  []string{"tasks 4 of 3", "Service a", "Service b"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ns := mustParse(t, tc.apply)[0].GetMetadata().Namespace
			applyOK(t, c, quotaNS(ns, tc.quota))
			if tc.setup != "" {
				applyOK(t, c, tc.setup)
			}
			applyRefused(t, m, c, tc.apply, codes.ResourceExhausted, tc.want...)
		})
	}
}

// Only growth is refused: under a lowered quota a service may shrink, or
// be applied again as it is, but not grow.
func TestAdmissionQuotaLoweredAllowsShrinking(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	applyOK(t, c, quotaNS("shrink", "{cpu: 4, tasks: 10}"))
	applyOK(t, c, svcYAML("shrink", "web", "4", "{cpu: 1}"))
	applyOK(t, c, quotaNS("shrink", "{cpu: 2, tasks: 10}"))
	applyOK(t, c, svcYAML("shrink", "web", "4", "{cpu: 1}")) // unchanged
	applyOK(t, c, svcYAML("shrink", "web", "3", "{cpu: 1}")) // shrinking, still over
	applyRefused(t, m, c, svcYAML("shrink", "web", "4", "{cpu: 1}"), codes.ResourceExhausted, "cpu 4 of 2")
	applyRefused(t, m, c, svcYAML("shrink", "other", "1", "{cpu: 1}"), codes.ResourceExhausted, "cpu 4 of 2")
}

func autoscaledYAML(ns, name, max string) string {
	return strings.Replace(svcYAML(ns, name, "1", "{cpu: 200m}"), "spec:\n", "spec:\n  autoscale: {min: 1, max: "+max+", cpu: 80}\n", 1)
}

// An autoscaled service admitted under a quota its max no longer fits (the
// quota lowered, or admitted before max was counted) runs on: applied
// again as it is or with a lower max it is admitted, while any growth of
// the namespace is refused.
func TestAdmissionQuotaAutoscaledOverAStoredQuota(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	applyOK(t, c, quotaNS("as-low", "{tasks: 10}"))
	applyOK(t, c, autoscaledYAML("as-low", "web", "8"))
	applyOK(t, c, quotaNS("as-low", "{tasks: 3}"))
	applyOK(t, c, autoscaledYAML("as-low", "web", "8")) // unchanged
	applyOK(t, c, autoscaledYAML("as-low", "web", "6")) // shrinking, still over
	applyRefused(t, m, c, autoscaledYAML("as-low", "web", "7"), codes.ResourceExhausted, "tasks 7 of 3", "(web: 7)")
	applyRefused(t, m, c, svcYAML("as-low", "other", "1", "{cpu: 200m}"), codes.ResourceExhausted, "tasks 7 of 3", "(web: 6)")
}

// A global service counts a task per eligible node.
func TestAdmissionQuotaGlobalCountsEligibleNodes(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	ctx := context.Background()
	for _, name := range []string{"n1", "n2", "n3"} {
		o, _ := legion.New(legion.KindNode)
		n := o.(*legion.Node)
		n.Metadata.Name = name
		n.Spec.Role, n.Spec.Availability = legion.RoleWorker, legion.AvailabilityActive
		n.Status.State = legion.NodeReady
		if name == "n3" {
			n.Spec.Availability = legion.AvailabilityDrain
		}
		if _, _, err := m.s.Store().Put(ctx, n, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	applyOK(t, c, quotaNS("glob", "{cpu: 250m}"))
	global := func(cpu string) string {
		return "apiVersion: legion/v1\nkind: Service\nmetadata: {name: agent, namespace: glob}\nspec:\n  mode: global\n" +
			"  pod: {containers: [{name: c, image: a:1, resources: {requests: {cpu: " + cpu + "}}}]}\n"
	}
	applyOK(t, c, global("120m")) // two eligible nodes: 240m
	applyRefused(t, m, c, global("130m"), codes.ResourceExhausted, "cpu 260m of 250m")
}

// The leader admits Services one at a time: applies racing for the last
// room under a quota cannot all get it.
func TestAdmissionQuotaConcurrentAppliesSerialised(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	applyOK(t, c, quotaNS("race", "{tasks: 3}"))
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "s" + string(rune('a'+i))
			_, errs[i] = c.Apply(context.Background(), mustParse(t, svcYAML("race", name, "1", "{}")), client.ApplyOptions{})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case client.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "tasks 4 of 3"):
			t.Fatalf("unexpected refusal: %v", err)
		}
	}
	svcs, _, err := m.s.Store().List(legion.KindService, "race", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ok != 3 || len(svcs) != 3 {
		t.Fatalf("%d applies accepted, %d services stored; want 3 under a quota of 3 tasks", ok, len(svcs))
	}
}
