package main

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler"
)

// create job --from cronjob/NAME runs a CronJob's Job now, as kubectl's
// does: a Job of the given name, with the template's spec, counted as the
// CronJob's run; a name taken is refused, not replaced.
func TestCreateJobFromCronJob(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  job: {backoffLimit: 1, pod: {containers: [{name: c, image: localhost/hello:1, pullPolicy: never, args: [-listen, "$(LEGION_POD_IP):8080"]}]}}
`)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	out, err := runLegion(t, "", append([]string{"create", "job", "by-hand", "--from", "cronjob/nightly"}, flags...)...)
	if err != nil || out != "job/by-hand created from cronjob/nightly\n" {
		t.Fatalf("create job --from cronjob/nightly: %v %q", err, out)
	}
	o, err := n.Client.Get(ctx, legion.KindJob, "default", "by-hand")
	if err != nil {
		t.Fatal(err)
	}
	j := o.(*legion.Job)
	if j.Metadata.Labels[scheduler.LabelCronJob] != "nightly" || j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 1 ||
		j.Spec.Pod.Containers[0].Args[0] != "-listen" {
		t.Errorf("the Job made: labels %v, spec %+v", j.Metadata.Labels, j.Spec)
	}
	waitFor(t, "the CronJob to count the Job as its run", func() bool {
		o, err := n.Client.Get(ctx, legion.KindCronJob, "default", "nightly")
		return err == nil && strings.Join(o.(*legion.CronJob).Status.Active, ",") == "by-hand"
	})
	if _, err := runLegion(t, "", append([]string{"create", "job", "by-hand", "--from", "cronjob/nightly"}, flags...)...); err == nil ||
		!strings.Contains(err.Error(), "job default/by-hand exists") {
		t.Errorf("a second create of the name: %v", err)
	}
	for args, says := range map[string]string{
		"create job x":                     "--from cronjob/NAME is required",
		"create job x --from service/web":  `--from "service/web": expected cronjob/NAME`,
		"create job x --from cronjob/none": "not found",
	} {
		if _, err := runLegion(t, "", append(strings.Fields(args), flags...)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
}

// create namespace makes the Namespace object, as kubectl's does, and
// refuses one already there and the reserved name.
func TestCreateNamespace(t *testing.T) {
	t.Parallel()
	n := startCluster(t)
	ctx := context.Background()
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	out, err := runLegion(t, "", append([]string{"create", "namespace", "team"}, flags...)...)
	if err != nil || out != "namespace/team created\n" {
		t.Fatalf("create namespace team: %v %q", err, out)
	}
	o, err := n.Client.Get(ctx, legion.KindNamespace, "", "team")
	if err != nil {
		t.Fatal(err)
	}
	if iso := o.(*legion.Namespace).Spec.Isolation; iso != legion.IsolationNamespace {
		t.Errorf("the Namespace made has isolation %q, want the default %q", iso, legion.IsolationNamespace)
	}
	for args, says := range map[string]string{
		"create namespace team":               "namespace team exists",
		"create ns " + legion.SystemNamespace: "reserved",
		"create namespace Team":               `name "Team"`,
	} {
		if _, err := runLegion(t, "", append(strings.Fields(args), flags...)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
}
