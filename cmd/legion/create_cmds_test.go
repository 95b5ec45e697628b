package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/server"
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

// legion create secret and create config make one of one value, from a
// file or standard input, as docker secret create does; one there is
// refused, and kubectl's --from-literal is refused saying why.
func TestCreateSecretAndConfig(t *testing.T) {
	t.Parallel()
	s, dir := startDaemon(t)
	flags := []string{"--server", s.Addr(), "--credentials", filepath.Join(dir, server.AdminFile)}
	if out, err := runLegion(t, "", "init", "--server", s.Addr()); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "nginx.conf")
	if err := os.WriteFile(file, []byte("worker_processes 2;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runLegion(t, "s3cret", append([]string{"create", "secret", "db-password", "-", "-n", "shop", "--label", "app=db"}, flags...)...)
	if err != nil || out != "secret/db-password -n shop created (6 bytes)\n" {
		t.Fatalf("create secret from standard input: %v %q", err, out)
	}
	if out, err := runLegion(t, "", append([]string{"create", "config", "nginx", file}, flags...)...); err != nil || !strings.Contains(out, "config/nginx created (20 bytes)") {
		t.Fatalf("create config from a file: %v %q", err, out)
	}
	st := s.Store()
	sec, _, err := st.Get(legion.KindSecret, "shop", "db-password")
	if err != nil || string(sec.(*legion.Secret).Spec.Data) != "s3cret" || sec.GetMetadata().Labels["app"] != "db" {
		t.Fatalf("the Secret made: %+v, %v", sec, err)
	}
	cfg, _, err := st.Get(legion.KindConfig, legion.DefaultNamespace, "nginx")
	if err != nil || string(cfg.(*legion.Config).Spec.Data) != "worker_processes 2;\n" {
		t.Fatalf("the Config made: %+v, %v", cfg, err)
	}
	for args, says := range map[string]string{
		"create secret db-password - -n shop":                "secret shop/db-password exists: legion apply or legion edit change it",
		"create secret pw --from-literal=password=s3cret":    "--from-literal: a Secret holds one value, not keys",
		"create config empty":                                "expected FILE, or - for standard input, after NAME",
		"create config Bad " + file:                          `name "Bad"`,
		"create config two " + file + " --from-file " + file: "not both",
	} {
		if _, err := runLegion(t, "other", append(strings.Fields(args), flags...)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
	if sec, _, _ := st.Get(legion.KindSecret, "shop", "db-password"); string(sec.(*legion.Secret).Spec.Data) != "s3cret" {
		t.Errorf("a refused create changed the Secret to %q", sec.(*legion.Secret).Spec.Data)
	}
}
