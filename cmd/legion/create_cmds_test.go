package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/testaddr"
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
		"create job x":                                    "--image IMAGE (a Job of one container) or --from cronjob/NAME (a CronJob's) is required",
		"create job x --from service/web":                 `--from "service/web": expected cronjob/NAME`,
		"create job x --from cronjob/none":                "not found",
		"create job x --from cronjob/nightly --image a:1": "--from runs a CronJob's job template as it is",
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
	// kubectl's configmap is a Config here.
	if out, err := runLegion(t, "", append([]string{"create", "configmap", "conf", "--from-file", file}, flags...)...); err != nil || out != "config/conf created (20 bytes)\n" {
		t.Fatalf("create configmap: %v %q", err, out)
	}
	// kubectl's forms with a meaning here: generic NAME --from-file, and
	// tls NAME --cert --key (served in TestRouteServedByTheIngressProxy).
	if out, err := runLegion(t, "", append([]string{"create", "secret", "generic", "nginx-conf", "--from-file", file}, flags...)...); err != nil || out != "secret/nginx-conf created (20 bytes)\n" {
		t.Fatalf("create secret generic NAME --from-file: %v %q", err, out)
	}
	certDir := t.TempDir()
	cert, key, _ := certFiles(t, certDir, "a.test")
	other, otherKey, _ := certFiles(t, t.TempDir(), "b.test")
	for args, says := range map[string]string{
		"create secret tls pair --cert " + cert + " --key " + otherKey:          "private key does not match public key",
		"create secret tls pair --cert " + key + " --key " + cert:               "PEM inputs may have been switched",
		"create secret tls pair --cert " + cert:                                 "--cert and --key go together",
		"create secret tls pair " + other + " --cert " + cert + " --key " + key: "accepts between 1 and 2 arg(s)",
		"create secret pair " + other + " --cert " + cert + " --key " + key:     "give NAME alone, not FILE or --from-file",
		"create secret tls pair":                                                "give the certificate and key files as --cert FILE --key FILE",
		"create secret pair --from-file=pw=" + file:                             "takes no KEY=: give --from-file " + file,
		"create config pair --cert " + cert + " --key " + key:                   "unknown flag: --cert",
	} {
		if _, err := runLegion(t, "", append(strings.Fields(args), flags...)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
	if _, _, err := st.Get(legion.KindSecret, legion.DefaultNamespace, "pair"); err == nil {
		t.Errorf("a refused create secret tls made the Secret")
	}
	for args, says := range map[string]string{
		"create secret db-password - -n shop":                "secret shop/db-password exists: legion apply or legion edit change it (a new value: legion create secret db-password FILE --dry-run -o yaml | legion apply -f -)",
		"create secret pw --from-literal=password=s3cret":    "--from-literal: a Secret holds one value, not keys",
		"create config empty":                                "expected FILE, or - for standard input, after NAME",
		"create config Bad " + file:                          `name "Bad"`,
		"create config two " + file + " --from-file " + file: "not both",
		"create secret two --from-file a --from-file b":      "given twice (a, then b): a Secret holds one value, not keys",
	} {
		if _, err := runLegion(t, "other", append(strings.Fields(args), flags...)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
	if sec, _, _ := st.Get(legion.KindSecret, "shop", "db-password"); string(sec.(*legion.Secret).Spec.Data) != "s3cret" {
		t.Errorf("a refused create changed the Secret to %q", sec.(*legion.Secret).Spec.Data)
	}
	// kubectl's way to give a Secret a new value: the manifest a dry run
	// prints, applied. An empty manifest is refused before the cluster.
	manifest, err := runLegion(t, "n3w", append([]string{"create", "secret", "db-password", "-", "-n", "shop", "--dry-run", "-o", "yaml"}, flags...)...)
	if err != nil || !strings.Contains(manifest, "data: bjN3\n") {
		t.Fatalf("create secret --dry-run -o yaml: %v\n%s", err, manifest)
	}
	if out, err := runLegion(t, manifest, append([]string{"apply", "-f", "-"}, flags...)...); err != nil || out != "secret/db-password -n shop updated\n" {
		t.Fatalf("applying the dry run's manifest: %v %q", err, out)
	}
	if sec, _, _ := st.Get(legion.KindSecret, "shop", "db-password"); string(sec.(*legion.Secret).Spec.Data) != "n3w" {
		t.Errorf("the Secret's value after the apply: %q, want n3w", sec.(*legion.Secret).Spec.Data)
	}
	if out, err := runLegion(t, "", append([]string{"create", "config", "later", file, "--dry-run"}, flags...)...); err != nil || out != "config/later created (dry run)\n" {
		t.Errorf("create config --dry-run: %v %q", err, out)
	}
	if _, _, err := st.Get(legion.KindConfig, legion.DefaultNamespace, "later"); err == nil {
		t.Error("a dry run made the Config")
	}
	if _, err := runLegion(t, "", append([]string{"apply", "-f", "-"}, flags...)...); err == nil || err.Error() != "apply: no object in standard input" {
		t.Errorf("apply of nothing: %v", err)
	}
}

// create service makes a Service from flags as docker service create
// does (-p, -e, the arguments after --), and follows it with --wait; a
// dry run prints the manifest and makes nothing; a name taken is
// refused, and kubectl's kinds are said to be a Service here.
func TestCreateService(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("base", ""))
	_, port, err := net.SplitHostPort(testaddr.Loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	_, port2, err := net.SplitHostPort(testaddr.Loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(args ...string) (string, error) { return runLegion(t, "", append(flags, args...)...) }
	// One target published on two ports, as docker service create takes it.
	create := []string{"create", "service", "web", "--image", "localhost/hello:1", "--replicas", "2", "-p", port + ":8080", "-p", port2 + ":8080", "-e", "NAME=from flags"}
	words := []string{"--", "-listen", "$(LEGION_POD_IP):8080"}

	out, err := run(slices.Concat(create, []string{"--dry-run", "-o", "yaml"}, words)...)
	if err != nil {
		t.Fatalf("create service --dry-run -o yaml: %v\n%s", err, out)
	}
	objs, err := legion.ParseManifest("dry-run", []byte(out))
	if err != nil || len(objs) != 1 {
		t.Fatalf("the dry run's manifest: %v\n%s", err, out)
	}
	s := objs[0].(*legion.Service)
	ctr := s.Spec.Pod.Containers[0]
	if *s.Spec.Replicas != 2 || ctr.Image != "localhost/hello:1" || !slices.Equal(ctr.Args, words[1:]) || ctr.Env[0] != (legion.EnvVar{Name: "NAME", Value: "from flags"}) ||
		len(s.Spec.Endpoint.Ports) != 2 || s.Spec.Endpoint.Ports[0].PublishedPort != atoi(t, port) || s.Spec.Endpoint.Ports[0].Port != 8080 ||
		s.Spec.Endpoint.Ports[1].PublishedPort != atoi(t, port2) || s.Spec.Endpoint.Ports[1].Port != atoi(t, port2) || s.Spec.Endpoint.Ports[1].TargetPort.Number != 8080 ||
		len(ctr.Ports) != 1 {
		t.Errorf("the dry run's service: %+v", s.Spec)
	}
	// Without -o the cluster checks it, as apply --dry-run has it do.
	if out, err := run(slices.Concat(create, []string{"--dry-run"}, words)...); err != nil || out != "service/web created (dry run)\n" {
		t.Fatalf("create service --dry-run: %v %q", err, out)
	}
	if _, err := n.Client.Get(ctx, legion.KindService, "default", "web"); err == nil {
		t.Fatal("a dry run made the service")
	}

	out, err = run(slices.Concat(create, []string{"--wait", "--timeout", "90s"}, words)...)
	if err != nil || !strings.HasPrefix(out, "service/web created\n") || !strings.Contains(out, "2 of 2 tasks updated, 2 ready") {
		t.Fatalf("create service --wait: %v\n%s", err, out)
	}
	for _, p := range []string{port, port2} {
		waitFor(t, "published port "+p+" to answer", func() bool {
			resp, err := http.Get("http://127.0.0.1:" + p + "/")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			return strings.TrimSpace(string(body)) == "from flags"
		})
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{create, "create service: service default/web exists: legion apply or legion edit change it"},
		{append(create, "--dry-run"), "create service: service default/web exists"},
		{[]string{"create", "service", "api", "--image", "x", "serve"}, `"serve": the container's arguments go after --`},
		{[]string{"create", "service", "api"}, "--image is required"},
		{[]string{"create", "service", "api", "--image", "x", "--image", "y"}, "given twice (x, then y): a service made here has one container"},
		{[]string{"create", "service", "api", "--image", "x", "--command"}, "--command: expected the command after --"},
		{[]string{"create", "service", "api", "--image", "x", "-p", "127.0.0.1:80:80"}, "a host address is not supported"},
		{[]string{"create", "service", "api", "--image", "x", "-p", "8080:80", "-p", "8081:80", "--port", "8081"}, `--port "8081": target 8081/tcp needs service port 8081/tcp, which target 80 has already`},
		{[]string{"create", "service", "api", "--image", "x", "--port", "8080:80"}, `--port "8080:80": a port to publish goes in --publish (-p)`},
		{[]string{"create", "deployment", "api", "--image=x"}, "a Deployment is a Service here: legion create service NAME --image IMAGE"},
		{[]string{"create", "ds", "api", "--image=x"}, "--mode global"},
		{[]string{"create", "ingress", "site", "--rule=a/=web:80"}, "an Ingress is a Route here: write a Route's manifest"},
		{[]string{"create", "rolebinding", "bob", "--role=edit", "--user=bob"}, "legion user create NAME --role view|edit|admin -n NAMESPACE"},
		{[]string{"create", "quota", "q", "--hard=cpu=1"}, "a namespace's quota is its Namespace's spec.quota"},
		{[]string{"create", "sa", "robot"}, "Legion has no service accounts"},
	} {
		if _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("legion %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// create job --image runs a Job of one container from flags, as kubectl
// create job does, and --wait follows it to its end (1 for one that
// fails); create cronjob makes a CronJob so, its schedule checked.
func TestCreateJobAndCronJobFromFlags(t *testing.T) {
	t.Parallel()
	n := startCluster(t)
	loadHello(context.Background(), t, n)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(args ...string) (string, error) { return runLegion(t, "", append(flags, args...)...) }

	out, err := run("create", "job", "count", "--image", "localhost/hello:1", "--completions", "2", "-e", "WHO=flags", "--wait", "--timeout", "1m", "--", "-say", "counted", "-exit", "0")
	if err != nil || !strings.HasPrefix(out, "job/count created\n") || !strings.Contains(out, "job default/count: complete: 2 of 2 completions") {
		t.Fatalf("create job --image --wait: %v\n%s", err, out)
	}
	j, err := client.GetAs[*legion.Job](context.Background(), n.Client, legion.KindJob, "default", "count")
	if err != nil || j.Spec.Completions != 2 || j.Spec.Pod.Containers[0].Env[0] != (legion.EnvVar{Name: "WHO", Value: "flags"}) ||
		strings.Join(j.Spec.Pod.Containers[0].Args, " ") != "-say counted -exit 0" {
		t.Fatalf("the Job made: %+v, %v", j, err)
	}
	if logs, err := run("logs", "job/count"); err != nil || strings.Count(logs, "counted") != 2 {
		t.Errorf("the job's output: %v\n%s", err, logs)
	}
	var ee *exitError
	if _, err := run("create", "job", "fails", "--image", "localhost/hello:1", "--backoff-limit", "0", "--wait", "--timeout", "1m", "--", "-exit", "3"); !errors.As(err, &ee) || ee.code != rolloutFailed {
		t.Errorf("create job --wait of a failing job: %v, want exit %d", err, rolloutFailed)
	}

	if out, err := run("create", "cronjob", "tick", "--image", "localhost/hello:1", "--schedule", "30 2 * * *", "--", "-exit", "0"); err != nil || out != "cronjob/tick created\n" {
		t.Fatalf("create cronjob: %v %q", err, out)
	}
	cj, err := client.GetAs[*legion.CronJob](context.Background(), n.Client, legion.KindCronJob, "default", "tick")
	if err != nil || cj.Spec.Schedule != "30 2 * * *" || cj.Spec.Job.Pod.Containers[0].Image != "localhost/hello:1" {
		t.Fatalf("the CronJob made: %+v, %v", cj, err)
	}
	if out, err := run("create", "job", "dry", "--image", "localhost/hello:1", "--dry-run", "-o", "yaml"); err != nil || !strings.Contains(out, "kind: Job") || !strings.Contains(out, "backoffLimit: 6") {
		t.Errorf("create job --dry-run -o yaml: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"create", "cronjob", "c", "--image", "a:1"}, "--schedule is required"},
		{[]string{"create", "cronjob", "c", "--image", "a:1", "--schedule", "@every 5m"}, "expected five cron fields (minute hour day-of-month month day-of-week), or one of @yearly"},
		{[]string{"create", "cronjob", "c", "--schedule", "0 3 * * *"}, "--image is required"},
		{[]string{"create", "job", "j", "--image", "a:1", "--completions", "-1"}, "spec.completions"},
		{[]string{"create", "job", "j", "--image", "a:1", "extra"}, `"extra": the container's arguments go after --`},
		{[]string{"create", "job", "count", "--image", "localhost/hello:1"}, "job default/count exists"},
		{[]string{"create", "job", "j", "--image", "a:1", "--dry-run", "--wait"}, "--wait and --dry-run"},
	} {
		if _, err := run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("legion %q: %v, want it to say %q", tc.args, err, tc.says)
		}
	}
}

// legion create -f makes a manifest's objects, namespaces first, as
// kubectl create -f does; it replaces nothing: those there are refused by
// name, unchanged, while the others are made.
func TestCreateFromManifests(t *testing.T) {
	t.Parallel()
	n := startCluster(t)
	ctx := context.Background()
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	dir := t.TempDir()
	first := filepath.Join(dir, "first.yaml")
	// The Namespace comes last in the file, and is made first.
	if err := os.WriteFile(first, []byte(`apiVersion: legion/v1
kind: Config
metadata: {name: site, namespace: team, labels: {app: site}}
spec: {text: one}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: team}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runLegion(t, "", append([]string{"create", "-f", first, "--dry-run"}, flags...)...)
	if err != nil || out != "namespace/team created (dry run)\nconfig/site -n team created (dry run)\n" {
		t.Fatalf("create -f --dry-run: %v %q", err, out)
	}
	if _, err := n.Client.Get(ctx, legion.KindNamespace, "", "team"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("a dry run made namespace team: %v", err)
	}
	out, err = runLegion(t, "", append([]string{"create", "-f", first}, flags...)...)
	if err != nil || out != "namespace/team created\nconfig/site -n team created\n" {
		t.Fatalf("create -f: %v %q", err, out)
	}

	// Both files, the second changing config/site and adding one: that
	// one is made, the three there are named and keep what they held.
	second := filepath.Join(dir, "second.yaml")
	if err := os.WriteFile(second, []byte(`apiVersion: legion/v1
kind: Config
metadata: {name: site, namespace: team}
spec: {text: two}
---
apiVersion: legion/v1
kind: Config
metadata: {name: extra}
spec: {text: three}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = runLegion(t, "", append([]string{"create", "-f", first, "-f", second}, flags...)...)
	if !strings.Contains(out, "config/extra created\n") {
		t.Errorf("create -f with one object new did not make it: %q", out)
	}
	for _, want := range []string{"3 of the 4 objects were not made", "namespace/team exists", "config/site -n team exists", "legion get config site -n team -o yaml"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("create -f of objects there: %v, want it to say %q", err, want)
		}
	}
	if o, err := n.Client.Get(ctx, legion.KindConfig, "team", "site"); err != nil || string(o.(*legion.Config).Spec.Data) != "one" {
		t.Errorf("create -f changed config/site: %v %+v", err, o)
	}
	if _, err := n.Client.Get(ctx, legion.KindConfig, legion.DefaultNamespace, "extra"); err != nil {
		t.Errorf("config/extra was not stored: %v", err)
	}

	for args, says := range map[string]string{
		"create":                              "or the manifests to make it from (-f FILE)",
		"create -f " + first + " -l app=none": "no object of the manifests has labels that match -l app=none",
		"create -f " + first + " --edit":      "legion edit KIND NAME",
	} {
		if _, err := runLegion(t, "", append(strings.Fields(args), flags...)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
}

// apply -o and create -f -o print the objects as stored, as kubectl's do:
// their names, or their bodies with the versions the cluster gave them.
func TestApplyAndCreatePrintWhatIsStored(t *testing.T) {
	t.Parallel()
	n := startCluster(t)
	ctx := context.Background()
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	file := filepath.Join(t.TempDir(), "configs.yaml")
	if err := os.WriteFile(file, []byte(`apiVersion: legion/v1
kind: Config
metadata: {name: one}
spec: {text: a}
---
apiVersion: legion/v1
kind: Config
metadata: {name: two}
spec: {text: b}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runLegion(t, "", append([]string{"create", "-f", file, "-o", "name"}, flags...)...)
	if err != nil || out != "config/one\nconfig/two\n" {
		t.Fatalf("create -f -o name: %v %q", err, out)
	}
	stored, err := n.Client.Get(ctx, legion.KindConfig, legion.DefaultNamespace, "two")
	if err != nil {
		t.Fatal(err)
	}
	out, err = runLegion(t, "", append([]string{"apply", "-f", file, "-o", "jsonpath={.items[*].metadata.version}"}, flags...)...)
	if want := strconv.FormatUint(stored.GetMetadata().Version, 10); err != nil || !strings.HasSuffix(out, " "+want) {
		t.Errorf("apply -o jsonpath: %v %q, want the versions stored, config/two's %s last", err, out, want)
	}
	out, err = runLegion(t, "", append([]string{"apply", "-f", file, "-l", "app!=x", "-o", "yaml", "--dry-run"}, flags...)...)
	if err != nil || !strings.Contains(out, "kind: Config\nmetadata:\n  name: one\n") || !strings.Contains(out, "spec:\n  data: YQ==\n") || !strings.Contains(out, "\n---\n") {
		t.Errorf("apply --dry-run -o yaml: %v\n%s", err, out)
	}
	if _, err := runLegion(t, "", append([]string{"apply", "-f", file, "-o", "wide"}, flags...)...); err == nil || !strings.Contains(err.Error(), "apply -o wide: tables are legion get's") {
		t.Errorf("apply -o wide: %v", err)
	}
}

// create service takes docker service create's resources and placement
// constraints, in Docker's units; a value Docker would refuse is refused
// naming the flag, and docker's --name says where the name goes here.
func TestCreateServiceDockerResourcesAndConstraints(t *testing.T) {
	t.Parallel()
	create := []string{"create", "service", "web", "--image", "localhost/hello:1", "--dry-run", "-o", "yaml"}
	out, err := runLegion(t, "", append(create, "--limit-cpu", "0.5", "--limit-memory", "64m", "--reserve-cpu", "0.25", "--reserve-memory", "32M",
		"--constraint", "node.role == manager", "--constraint", "node.labels.disk==ssd")...)
	if err != nil {
		t.Fatalf("create service with docker's resources: %v\n%s", err, out)
	}
	objs, err := legion.ParseManifest("dry-run", []byte(out))
	if err != nil || len(objs) != 1 {
		t.Fatalf("the dry run's manifest: %v\n%s", err, out)
	}
	s := objs[0].(*legion.Service)
	res := s.Spec.Pod.Containers[0].Resources
	if res.Limits.CPU != 500 || res.Limits.Memory != 64<<20 || res.Requests.CPU != 250 || res.Requests.Memory != 32<<20 {
		t.Errorf("resources %+v, want limits 500m 64Mi and requests 250m 32Mi", res)
	}
	if want := []string{"node.role == manager", "node.labels.disk == ssd"}; !slices.Equal(s.Spec.Placement.Constraints, want) {
		t.Errorf("constraints %q, want %q", s.Spec.Placement.Constraints, want)
	}
	for args, says := range map[string]string{
		"--limit-memory 64q":                    `--limit-memory "64q": expected a size such as 64m or 1g`,
		"--reserve-cpu -1":                      `--reserve-cpu "-1": expected a number of CPUs`,
		"--constraint disk=ssd":                 `constraint "disk=ssd": expected <attribute> == <value>`,
		"--reserve-memory 1g --limit-memory 1m": "requests.memory: 1Gi is above the limit 1Mi",
		"--name web2":                           "the service's name is the word after create service here",
	} {
		if _, err := runLegion(t, "", append(slices.Clone(create), strings.Fields(args)...)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("create service %s: %v, want it to say %q", args, err, says)
		}
	}
}
