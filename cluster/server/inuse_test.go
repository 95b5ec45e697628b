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
	refused := func(kind legion.Kind, name, want string) {
		t.Helper()
		_, err := c.Delete(ctx, kind, "shop", name, nil)
		if client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
			t.Fatalf("delete %s %s: %v, want FailedPrecondition saying %q", kind, name, err, want)
		}
		if _, err := c.Get(ctx, kind, "shop", name); err != nil {
			t.Fatalf("%s %s gone after a refused delete: %v", kind, name, err)
		}
	}
	// weekly-1's CronJob is gone: the planner deletes it, so it holds
	// nothing (as after a delete -f of a CronJob and its Secret).
	refused(legion.KindSecret, "pw", "Secret shop/pw is in use by service/web, job/migrate, job/nightly-1, cronjob/nightly: take it out of their specs, or delete them, first")
	refused(legion.KindConfig, "settings", "Config shop/settings is in use by service/web:")

	// The Job over, and the other two gone: nothing holds pw.
	st := m.s.Store()
	o, _, err := st.Get(legion.KindJob, "shop", "migrate")
	if err != nil {
		t.Fatal(err)
	}
	j := legion.Clone(o).(*legion.Job)
	j.Status.State = legion.JobComplete
	if _, _, err := st.Put(ctx, j, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
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
