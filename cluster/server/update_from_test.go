package server

import (
	"context"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
)

// A scale written just before a pod change, the planner having seen
// neither, is part of the spec the update comes from: the write that
// changes the pod gives status.spec the spec stored before it. Two pod
// changes in a row leave it at the one the planner saw (the pod running).
func TestAnUpdateComesFromTheSpecStoredBeforeIt(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	c := initCluster(t, m)
	ctx := context.Background()
	st := m.s.Store()
	service := func(replicas, image string) legion.Object {
		return mustParse(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: `+replicas+`
  pod:
    containers: [{name: web, image: `+image+`}]
`)[0]
	}
	stored := func() *legion.Service {
		t.Helper()
		o, _, err := st.Get(legion.KindService, legion.DefaultNamespace, "web")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Service)
	}
	apply := func(o legion.Object) {
		t.Helper()
		if _, err := c.ApplyOne(ctx, o, client.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	apply(service("2", "example/web:1"))
	// The planner's pass: it has seen the service as stored.
	s := stored()
	seen := s.Spec
	s.Status.Spec = &seen
	if _, err := st.PutStatus(ctx, s, store.Precondition{Version: s.Metadata.Version}); err != nil {
		t.Fatal(err)
	}

	apply(service("4", "example/web:1")) // a scale: the status is not the API's to touch
	if got := stored().Status.Spec; got == nil || *got.Replicas != 2 {
		t.Fatalf("after the scale, status.spec %+v; want the planner's (2 replicas)", got)
	}
	apply(service("4", "example/web:2")) // the update, before the planner's next pass
	got := stored().Status.Spec
	if got == nil || *got.Replicas != 4 || got.Pod.Containers[0].Image != "example/web:1" {
		t.Fatalf("the update comes from %+v; want 4 replicas of example/web:1", got)
	}
	apply(service("4", "example/web:3")) // another, still before the planner's pass
	got = stored().Status.Spec
	if got == nil || *got.Replicas != 4 || got.Pod.Containers[0].Image != "example/web:1" {
		t.Fatalf("after a second pod change, status.spec %+v; want the pod running, example/web:1", got)
	}
}
