package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/codes"
)

const shop = `
apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop, labels: {app: web}}
spec:
  replicas: 2
  pod:
    containers:
    - name: web
      image: nginx:1.27
      env: [{name: PASS, secret: db-pass}]
---
apiVersion: legion/v1
kind: Secret
metadata: {name: db-pass, namespace: shop}
spec: {text: hunter2}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {}
`

func TestSingleManagerServesEveryVerb(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	defer m.stop()
	ctx := context.Background()

	// A fresh daemon serves nothing but init, join and status.
	st, err := m.bare().Status(ctx)
	if err != nil || st.Initialized {
		t.Fatalf("fresh status: %+v %v", st, err)
	}
	c := initCluster(t, m)
	if _, err := m.bare().Init(ctx); err == nil {
		t.Fatal("a second init succeeded")
	}
	st, err = c.Status(ctx)
	if err != nil || !st.Initialized || st.State != "Leader" || len(st.Members) != 1 {
		t.Fatalf("status after init: %+v %v", st, err)
	}

	// Apply: kind order (the Service names a Secret applied with it).
	objs := mustParse(t, shop)
	res, err := c.Apply(ctx, objs, client.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, r := range res {
		got = append(got, string(r.Object.GetKind())+"/"+r.Outcome)
	}
	if diff := cmp.Diff([]string{"Service/created", "Secret/created", "Namespace/created"}, got); diff != "" {
		t.Fatalf("outcomes (-want +got):\n%s", diff)
	}
	if res[2].Object.GetMetadata().Version >= res[1].Object.GetMetadata().Version ||
		res[1].Object.GetMetadata().Version >= res[0].Object.GetMetadata().Version {
		t.Fatalf("not applied in kind order: versions %d %d %d", res[2].Object.GetMetadata().Version,
			res[1].Object.GetMetadata().Version, res[0].Object.GetMetadata().Version)
	}
	// Unchanged writes nothing.
	before := m.s.Store().AppliedIndex()
	res, err = c.Apply(ctx, mustParse(t, shop), client.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Outcome != client.Unchanged {
			t.Fatalf("second apply of %s: %s", r.Object.GetKind(), r.Outcome)
		}
	}
	if after := m.s.Store().AppliedIndex(); after != before {
		t.Fatalf("an unchanged apply wrote: applied index %d -> %d", before, after)
	}

	// Get, with the default namespace and not.
	svc, err := client.GetAs[*legion.Service](ctx, c, legion.KindService, "shop", "web")
	if err != nil || svc.Spec.Pod.Containers[0].Image != "nginx:1.27" || svc.Metadata.Generation != 1 {
		t.Fatalf("get: %+v %v", svc, err)
	}
	if _, err := c.Get(ctx, legion.KindService, "", "web"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get in default namespace: %v", err)
	}
	// Update bumps the generation; expected_version turns a race into ABORTED.
	svc.Spec.Replicas = ptr(3)
	stale := svc.Metadata.Version
	r, err := c.ApplyOne(ctx, svc, client.ApplyOptions{ExpectedVersion: &stale})
	if err != nil || r.Outcome != client.Updated || r.Object.GetMetadata().Generation != 2 {
		t.Fatalf("update: %+v %v", r, err)
	}
	svc.Spec.Replicas = ptr(4)
	if _, err := c.ApplyOne(ctx, svc, client.ApplyOptions{ExpectedVersion: &stale}); !errors.Is(err, client.ErrAborted) {
		t.Fatalf("apply at a stale version: %v, want aborted", err)
	}
	// Dry run: the outcome, nothing written.
	before = m.s.Store().AppliedIndex()
	r, err = c.ApplyOne(ctx, svc, client.ApplyOptions{DryRun: true})
	if err != nil || r.Outcome != client.Updated || r.Object.GetMetadata().Generation != 3 {
		t.Fatalf("dry run: %+v %v", r, err)
	}
	if m.s.Store().AppliedIndex() != before {
		t.Fatal("a dry run wrote")
	}

	// List with labels and across namespaces; the reserved namespace stays hidden.
	if _, err := c.ApplyOne(ctx, configObj("", "plain", "x"), client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	list, version, err := c.List(ctx, legion.KindService, client.ListOptions{AllNamespaces: true, Labels: map[string]string{"app": "web"}})
	if err != nil || len(list) != 1 || version == 0 {
		t.Fatalf("list: %d %d %v", len(list), version, err)
	}
	if l, _, _ := c.List(ctx, legion.KindService, client.ListOptions{AllNamespaces: true, Labels: map[string]string{"app": "db"}}); len(l) != 0 {
		t.Fatalf("label selector kept %d", len(l))
	}
	secrets, _, err := c.List(ctx, legion.KindSecret, client.ListOptions{AllNamespaces: true})
	if err != nil || len(secrets) != 1 {
		t.Fatalf("secrets across namespaces: %d (the join tokens must not show) %v", len(secrets), err)
	}
	if _, err := c.Get(ctx, legion.KindSecret, legion.SystemNamespace, "join-token-worker"); err == nil {
		t.Fatal("the reserved namespace was readable")
	}
	cfg, _, err := c.List(ctx, legion.KindConfig, client.ListOptions{})
	if err != nil || len(cfg) != 1 || cfg[0].GetMetadata().Namespace != "default" {
		t.Fatalf("a namespaced object without a namespace: %v %v", cfg, err)
	}

	// Watch from the list's version: the next change, once.
	w, err := c.Watch(ctx, legion.KindConfig, client.ListOptions{}, version)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := c.Delete(ctx, legion.KindConfig, "", "plain", nil); err != nil {
		t.Fatal(err)
	}
	e, err := w.Next()
	if err != nil || e.Type != client.Deleted || e.Object.GetMetadata().Name != "plain" {
		t.Fatalf("watch: %+v %v", e, err)
	}
	if _, err := c.Delete(ctx, legion.KindConfig, "", "plain", nil); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}

	// Refusals of apply.
	task := mustParse(t, "apiVersion: legion/v1\nkind: Config\nmetadata: {name: x}\nspec: {text: y}\n")[0]
	headerTask, _ := legion.New(legion.KindTask)
	headerTask.GetMetadata().Name = "t"
	if _, err := c.ApplyOne(ctx, headerTask, client.ApplyOptions{}); client.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "Task") {
		t.Fatalf("apply of a Task: %v", err)
	}
	task.GetMetadata().Namespace = legion.SystemNamespace
	if _, err := c.ApplyOne(ctx, task, client.ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "reserved") {
		t.Fatalf("apply into the reserved namespace: %v", err)
	}
	missing := mustParse(t, `
apiVersion: legion/v1
kind: Job
metadata: {name: j, namespace: shop}
spec:
  pod:
    imagePullSecrets: [regcred]
    volumes: [{name: data, volume: {name: vol1}}]
    containers:
    - name: c
      image: alpine
      configs: [{name: settings}]
      secrets: [{name: db-pass}]
      volumeMounts: [{name: data, path: /data}]
`)
	_, err = c.Apply(ctx, missing, client.ApplyOptions{})
	for _, want := range []string{"pull Secret regcred", "Volume vol1", "Config settings"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("job with missing references: %v; want it to name %s", err, want)
		}
	}
	if strings.Contains(err.Error(), "db-pass") {
		t.Fatalf("an existing secret was called missing: %v", err)
	}

	// Join tokens.
	tok, err := c.Token(ctx, "worker")
	if err != nil || !strings.HasPrefix(tok, "LGN-1-") {
		t.Fatalf("token: %q %v", tok, err)
	}
	tok2, err := c.RotateToken(ctx, "worker")
	if err != nil || tok2 == tok {
		t.Fatalf("rotate: %q %v", tok2, err)
	}
	if now, _ := c.Token(ctx, "worker"); now != tok2 {
		t.Fatalf("token after rotation %q, want %q", now, tok2)
	}
}

func ptr[T any](v T) *T { return &v }

func TestStopEndsWatchesWithUnavailable(t *testing.T) {
	t.Parallel()
	m := newManager(t)
	c := initCluster(t, m)
	w, err := c.Watch(context.Background(), legion.KindConfig, client.ListOptions{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	done := make(chan error, 1)
	go func() {
		_, err := w.Next()
		done <- err
	}()
	stopped := make(chan struct{})
	go func() {
		m.stop()
		close(stopped)
	}()
	select {
	case err := <-done:
		if client.Code(err) != codes.Unavailable {
			t.Fatalf("watch at shutdown: %v, want UNAVAILABLE", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not end at shutdown")
	}
	<-stopped
}
