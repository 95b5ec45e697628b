package controller

import (
	"context"
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
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
