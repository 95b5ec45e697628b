package endpoints

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
)

func TestCompute(t *testing.T) {
	objs, err := legion.ParseManifest("t", []byte(`apiVersion: legion/v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  pod: {containers: [{name: w, image: x, ports: [{name: http, containerPort: 8080}]}]}
  endpoint: {ports: [{port: 80, targetPort: http, publish: ingress, publishedPort: 8000}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: db}
spec:
  mode: stateful
  pod: {containers: [{name: d, image: x}]}
  endpoint: {mode: dnsrr}
`))
	if err != nil {
		t.Fatal(err)
	}
	web, db := objs[0].(*legion.Service), objs[1].(*legion.Service)
	web.Status.VIP = "10.201.0.1"
	db.Status.VIP = "10.201.0.2" // dnsrr: never given out
	task := func(name, owner, ip string, slot int, ready bool, state legion.TaskState) *legion.Task {
		return &legion.Task{Header: legion.Header{Metadata: legion.Metadata{Name: name, Namespace: "default"}},
			Spec:   legion.TaskSpec{Owner: legion.Owner{Kind: legion.KindService, Name: owner}, Node: "n1", Slot: slot, DesiredState: legion.TaskRunning},
			Status: legion.TaskStatus{State: state, Ready: ready, IP: ip}}
	}
	stopping := task("web-3-1", "web", "10.200.0.9", 3, true, legion.TaskRunning)
	stopping.Spec.DesiredState = legion.TaskShutdown
	got := Compute([]*legion.Service{web, db}, []*legion.Task{
		task("web-2-1", "web", "10.200.0.3", 2, true, legion.TaskRunning),
		task("web-1-1", "web", "10.200.0.2", 1, true, legion.TaskRunning),
		task("web-1-0", "web", "10.200.0.5", 1, false, legion.TaskRunning), // not ready
		stopping,
		task("db-0", "db", "10.200.0.4", 0, true, legion.TaskRunning),
		task("db-1", "db", "", 1, true, legion.TaskStarting),
	})
	want := []Service{
		{Namespace: "default", Name: "db", DNSRR: true, Stateful: true, Tasks: []Task{{Name: "db-0", IP: "10.200.0.4", Node: "n1", Slot: 0}}},
		{Namespace: "default", Name: "web", Labels: map[string]string{"app": "web"}, VIP: "10.201.0.1",
			Ports: []Port{{Protocol: legion.TCP, Port: 80, TargetPort: 8080, Publish: legion.PublishIngress, PublishedPort: 8000}},
			Tasks: []Task{{Name: "web-1-1", IP: "10.200.0.2", Node: "n1", Slot: 1}, {Name: "web-2-1", IP: "10.200.0.3", Node: "n1", Slot: 2}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("endpoints (-want +got):\n%s", d)
	}
}
