package controller

import (
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// The loop stores the planner's Namespace.status.used.
func TestLoopWritesNamespaceUsed(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	addNode(t, s, "n1")
	put(t, s, `apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {quota: {cpu: 2}}
---
apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  pod: {containers: [{name: web, image: nginx, resources: {requests: {cpu: 300m, memory: 64Mi}}}]}
`)
	l := &Loop{Store: s, Signals: &signals{beats: map[string]time.Time{"n1": time.Now()}}, Interval: time.Hour, LeaderSince: time.Now().Add(-time.Hour)}
	runLoop(t, l)
	var used *legion.QuotaUsage
	poll(t, "status.used of shop counting two placed tasks", func() bool {
		o, _, err := s.Get(legion.KindNamespace, "", "shop")
		if err != nil {
			t.Fatal(err)
		}
		used = o.(*legion.Namespace).Status.Used
		return used != nil && used.Tasks == 2
	})
	if want := (legion.QuotaUsage{CPU: 600, Memory: 128 << 20, Tasks: 2}); *used != want {
		t.Fatalf("status.used %+v, want %+v", *used, want)
	}
}

// Under an objects quota, status.used counts the namespace's objects of
// every kind but Task, as admission does; without one it counts none.
func TestLoopCountsObjectsUnderAnObjectsQuota(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	addNode(t, s, "n1")
	put(t, s, `apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {quota: {objects: 10}}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: lab}
---
apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  pod: {containers: [{name: web, image: nginx}]}
---
apiVersion: legion/v1
kind: Config
metadata: {name: site, namespace: shop}
spec: {text: hello}
---
apiVersion: legion/v1
kind: Secret
metadata: {name: pw, namespace: shop}
spec: {text: s3cret}
---
apiVersion: legion/v1
kind: Config
metadata: {name: notes, namespace: lab}
spec: {text: x}
`)
	l := &Loop{Store: s, Signals: &signals{beats: map[string]time.Time{"n1": time.Now()}}, Interval: time.Hour, LeaderSince: time.Now().Add(-time.Hour)}
	runLoop(t, l)
	used := func(ns string) *legion.QuotaUsage {
		o, _, err := s.Get(legion.KindNamespace, "", ns)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Namespace).Status.Used
	}
	poll(t, "status.used of shop counting its two tasks", func() bool {
		u := used("shop")
		return u != nil && u.Tasks == 2
	})
	if u := used("shop"); u.Objects != 3 {
		t.Errorf("shop's status.used counts %d objects, want 3 (a Service, a Config, a Secret; its Tasks are not counted)", u.Objects)
	}
	if u := used("lab"); u == nil || u.Objects != 0 {
		t.Errorf("lab (no objects quota) status.used %+v, want no objects counted", u)
	}
}
