package server

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc/codes"
)

// A Secret or Config a workload of its namespace names is not deleted
// (as apply refuses a workload naming one that does not exist), and the
// refusal names the workloads; once they let go of it, it is. A Job that
// is over starts nothing more and does not hold it.
func TestDeleteRefusesASecretOrConfigInUse(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	ctx := context.Background()
	applyOK(t, c, `apiVersion: legion/v1
kind: Secret
metadata: {name: pw, namespace: shop}
spec: {text: hunter2}
---
apiVersion: legion/v1
kind: Config
metadata: {name: settings, namespace: shop}
spec: {text: "color: blue"}
---
apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: web:1, secrets: [{name: pw}], env: [{name: COLOR, config: settings}]}]}
---
apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly, namespace: shop}
spec:
  schedule: "0 3 * * *"
  job: {pod: {containers: [{name: c, image: backup:1, env: [{name: PW, secret: pw}]}]}}
---
apiVersion: legion/v1
kind: Job
metadata: {name: migrate, namespace: shop}
spec:
  pod: {containers: [{name: c, image: migrate:1, secrets: [{name: pw}]}]}
---
apiVersion: legion/v1
kind: Job
metadata: {name: nightly-1, namespace: shop, labels: {legion.cronjob: nightly}}
spec:
  pod: {containers: [{name: c, image: backup:1, env: [{name: PW, secret: pw}]}]}
---
apiVersion: legion/v1
kind: Job
metadata: {name: weekly-1, namespace: shop, labels: {legion.cronjob: weekly}}
spec:
  pod: {containers: [{name: c, image: backup:1, env: [{name: PW, secret: pw}]}]}
`)
	refused := func(kind legion.Kind, name, want string) { t.Helper(); deleteRefused(t, c, kind, name, want) }
	// weekly-1's CronJob is gone: the planner deletes it, so it holds
	// nothing (as after a delete -f of a CronJob and its Secret).
	refused(legion.KindSecret, "pw", "Secret shop/pw is in use by service/web, job/migrate, job/nightly-1, cronjob/nightly: take it out of their specs, or delete them, first")
	refused(legion.KindConfig, "settings", "Config shop/settings is in use by service/web:")

	// The Job over, and the other two gone: nothing holds pw.
	st := m.s.Store()
	changeStored(t, st, legion.KindJob, "migrate", func(o legion.Object) { o.(*legion.Job).Status.State = legion.JobComplete })
	refused(legion.KindSecret, "pw", "is in use by service/web, job/nightly-1, cronjob/nightly:")
	for _, k := range []legion.Kind{legion.KindService, legion.KindCronJob} {
		name := map[legion.Kind]string{legion.KindService: "web", legion.KindCronJob: "nightly"}[k]
		if _, err := c.Delete(ctx, k, "shop", name, nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []legion.Kind{legion.KindSecret, legion.KindConfig} {
		name := map[legion.Kind]string{legion.KindSecret: "pw", legion.KindConfig: "settings"}[k]
		if _, err := c.Delete(ctx, k, "shop", name, nil); err != nil {
			t.Errorf("delete %s %s once nothing uses it: %v", k, name, err)
		}
	}
}

// A Volume is not deleted while something holds it: a workload naming
// it, a stateful service's wanted ordinal claiming it (deleted, it would
// be made again empty, and the running pod lose its data at its next
// start), or a live task mounting it. An ordinal scaled away, or a task
// that has ended, holds nothing.
func TestDeleteRefusesAVolumeInUse(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	ctx := context.Background()
	vol := func(name string) string { return volYAML("shop", name, "{size: 1Gi}") + "---\n" }
	applyOK(t, c, vol("data-db-0")+vol("data-db-1")+vol("shared")+vol("loose")+`apiVersion: legion/v1
kind: Service
metadata: {name: db, namespace: shop}
spec:
  mode: stateful
  replicas: 1
  pod:
    containers: [{name: c, image: db:1, volumeMounts: [{name: data, path: /data}]}]
    volumes: [{name: data, claim: {size: 1Gi}}]
---
apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  pod:
    containers: [{name: c, image: web:1, volumeMounts: [{name: s, path: /s}]}]
    volumes: [{name: s, volume: {name: shared}}]
`)
	st := m.s.Store()
	task := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
		Metadata: legion.Metadata{Name: "old-1-1", Namespace: "shop"}}}
	task.Spec = legion.TaskSpec{Owner: legion.Owner{Kind: legion.KindService, Name: "old"}, Node: "n1", DesiredState: legion.TaskShutdown,
		Volumes: map[string]string{"v": "loose"}}
	task.Status.State = legion.TaskRunning
	if _, _, err := st.Put(ctx, task, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"data-db-0": "Volume shop/data-db-0 is in use by service/db (its claim): take it out of their specs, scale the stateful service below its ordinal",
		"shared":    "Volume shop/shared is in use by service/web:",
		"loose":     "Volume shop/loose is in use by task/old-1-1:",
	} {
		deleteRefused(t, c, legion.KindVolume, name, want)
	}
	// Ordinal 1 is not wanted, and the task ends: both may go.
	if _, err := c.Delete(ctx, legion.KindVolume, "shop", "data-db-1", nil); err != nil {
		t.Errorf("delete the volume of an ordinal scaled away: %v", err)
	}
	changeStored(t, st, legion.KindTask, "old-1-1", func(o legion.Object) { o.(*legion.Task).Status.State = legion.TaskShutdown })
	if _, err := c.Delete(ctx, legion.KindVolume, "shop", "loose", nil); err != nil {
		t.Errorf("delete a volume whose task ended: %v", err)
	}
}

// deleteRefused deletes kind shop/name, wants it refused with
// FailedPrecondition saying want, and the object still there.
func deleteRefused(t *testing.T, c *client.Client, kind legion.Kind, name, want string) {
	t.Helper()
	ctx := context.Background()
	_, err := c.Delete(ctx, kind, "shop", name, nil)
	if client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Fatalf("delete %s %s: %v, want FailedPrecondition saying %q", kind, name, err, want)
	}
	if _, err := c.Get(ctx, kind, "shop", name); err != nil {
		t.Fatalf("%s %s gone after a refused delete: %v", kind, name, err)
	}
}

// changeStored writes kind shop/name back to the store as change leaves
// a copy of it, as a controller or a node would.
func changeStored(t *testing.T, st *store.Store, kind legion.Kind, name string, change func(legion.Object)) {
	t.Helper()
	o, _, err := st.Get(kind, "shop", name)
	if err != nil {
		t.Fatal(err)
	}
	cp := legion.Clone(o)
	change(cp)
	if _, _, err := st.Put(context.Background(), cp, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}
