package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testcluster"
)

// startDaemon starts a daemon that belongs to no cluster yet: the CLI
// under test inits it.
func startDaemon(t *testing.T) (*server.Server, string) {
	t.Helper()
	m := testcluster.StartManager(t, t.TempDir(), testaddr.Loopback(t), nil)
	return m.Server, m.Dir
}

// initDaemon is startDaemon made a cluster (legion init), with a run of
// the CLI against it as its admin: arguments, then its flags.
func initDaemon(t *testing.T) (*server.Server, func(stdin string, args ...string) (string, error)) {
	t.Helper()
	s, _, run := initDaemonFlags(t)
	return s, run
}

// initDaemonFlags is initDaemon that also gives the flags reaching the
// daemon, for a command the test runs itself (one it cancels).
func initDaemonFlags(t *testing.T) (*server.Server, []string, func(stdin string, args ...string) (string, error)) {
	t.Helper()
	s, dir := startDaemon(t)
	flags := []string{"--server", s.Addr(), "--credentials", filepath.Join(dir, server.AdminFile)}
	if out, err := runLegion(t, "", "init", "--server", s.Addr()); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	return s, flags, func(stdin string, args ...string) (string, error) {
		return runLegion(t, stdin, append(args, flags...)...)
	}
}

const cliManifest = `
apiVersion: legion/v1
kind: Config
metadata: {name: settings, labels: {app: web}}
spec: {text: "color: blue"}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {}
`

func TestClusterCommandsEndToEnd(t *testing.T) {
	s, dir := startDaemon(t)
	addr := s.Addr()
	out, err := runLegion(t, "", "status", "--server", addr)
	if err != nil || !strings.Contains(out, "belongs to no cluster") {
		t.Fatalf("status of a fresh daemon: %q %v", out, err)
	}
	out, err = runLegion(t, "", "init", "--server", addr)
	admin := filepath.Join(dir, server.AdminFile)
	if err != nil || !strings.Contains(out, admin) {
		t.Fatalf("init: %q %v", out, err)
	}
	st, err := os.Stat(admin)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin.pem: %v %v", st, err)
	}
	flags := []string{"--server", addr, "--credentials", admin}
	cli := func(stdin string, args ...string) (string, error) {
		return runLegion(t, stdin, append(args, flags...)...)
	}

	// kubectl's --dry-run=server is what --dry-run does; =client is
	// validate's, and said so; none applies.
	for _, v := range []string{"--dry-run", "--dry-run=server"} {
		if out, err := cli(cliManifest, "apply", "-f", "-", v); err != nil || out != "config/settings created (dry run)\nnamespace/shop created (dry run)\n" {
			t.Fatalf("apply %s: %v\n%s", v, err, out)
		}
	}
	if _, err := cli(cliManifest, "apply", "-f", "-", "--dry-run=client"); err == nil || !strings.Contains(err.Error(), "legion validate -f checks manifests without the cluster") {
		t.Fatalf("apply --dry-run=client: %v", err)
	}
	out, err = cli(cliManifest, "apply", "-f", "-", "--dry-run=none")
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if diff := cmp.Diff("config/settings created\nnamespace/shop created\n", out); diff != "" {
		t.Fatalf("apply output (-want +got):\n%s", diff)
	}
	out, _ = cli(cliManifest, "apply", "-f", "-")
	if !strings.Contains(out, "config/settings unchanged") {
		t.Fatalf("second apply: %q", out)
	}

	// Kind names kubectl-style, outputs.
	for _, kind := range []string{"config", "configs", "Config", "cfg"} {
		out, err = cli("", "get", kind, "-l", "app=web")
		if err != nil || !strings.Contains(out, "settings") || !strings.Contains(out, "app=web") {
			t.Fatalf("get %s: %q %v", kind, out, err)
		}
	}
	out, err = cli("", "get", "config", "settings", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := legion.ParseManifest("out.yaml", []byte(out))
	if err != nil || len(objs) != 1 || string(objs[0].(*legion.Config).Spec.Data) != "color: blue" {
		t.Fatalf("get -o yaml does not read back: %q %v", out, err)
	}
	out, err = cli("", "list", "ns", "-o", "json")
	if err != nil || !strings.Contains(out, `"name": "shop"`) {
		t.Fatalf("list ns -o json: %q %v", out, err)
	}
	// A listing as JSON (a list) is applied back as it is, as kubectl's.
	out, err = cli("", "get", "configs", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if back, err := cli(out, "apply", "-f", "-"); err != nil || back != "config/settings unchanged\n" {
		t.Fatalf("get configs -o json | apply -f -: %q %v", back, err)
	}
	out, err = cli("", "get", "configs", "-A")
	if err != nil || !strings.HasPrefix(out, "NAMESPACE") || !strings.Contains(out, "default") {
		t.Fatalf("get -A: %q %v", out, err)
	}

	// Diff: a changed spec shows as a unified diff and exits 1.
	changed := strings.Replace(cliManifest, "color: blue", "color: red", 1)
	out, err = cli(changed, "diff", "-f", "-")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("diff of a change: %v", err)
	}
	for _, want := range []string{"--- live/Config/default/settings", "+++ applied/Config/default/settings", "@@ "} {
		if !strings.Contains(out, want) {
			t.Fatalf("diff output lacks %q:\n%s", want, out)
		}
	}
	if out, err = cli(cliManifest, "diff", "-f", "-"); err != nil || out != "" {
		t.Fatalf("diff of nothing: %q %v", out, err)
	}

	// Tokens.
	tok, err := cli("", "token", "show", "worker")
	if err != nil || !strings.HasPrefix(tok, "LGN-1-") {
		t.Fatalf("token show: %q %v", tok, err)
	}
	rot, err := cli("", "token", "rotate", "worker")
	if err != nil || rot == tok {
		t.Fatalf("token rotate: %q %v", rot, err)
	}
	if _, err := cli("", "token", "show", "admin"); err == nil {
		t.Fatal("token show admin accepted")
	}

	// Status with credentials.
	out, err = cli("", "status")
	if err != nil || !strings.Contains(out, "Leader") || !strings.Contains(out, "Leader  voter") {
		t.Fatalf("status: %q %v", out, err)
	}

	// Delete by name and by file; a missing object is a clear one-line error.
	out, err = cli("", "delete", "config", "settings")
	if err != nil || out != "config/settings deleted\n" {
		t.Fatalf("delete: %q %v", out, err)
	}
	_, err = cli("", "delete", "config", "settings")
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("second delete: %v", err)
	}
	out, err = cli(cliManifest, "delete", "-f", "-")
	if err == nil || !strings.Contains(out, "namespace/shop deleted") || strings.Contains(out, "warning") {
		t.Fatalf("delete -f (config already gone): %q %v", out, err)
	}
	// A Namespace deleted while it holds objects: they stay, and the CLI
	// says so, as a kubectl user would expect them gone.
	const held = `
apiVersion: legion/v1
kind: Namespace
metadata: {name: kept}
spec: {}
---
apiVersion: legion/v1
kind: Config
metadata: {name: left, namespace: kept}
spec: {text: "x"}
`
	if _, err := cli(held, "apply", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if out, err := cli("", "get", "ns"); err != nil || !strings.Contains(out, "\nkept ") ||
		!strings.Contains(out, "objects live in default") {
		t.Fatalf("get ns with a Namespace object: %q %v", out, err)
	}
	out, err = cli("", "delete", "namespace", "kept")
	if err != nil || !strings.Contains(out, "namespace/kept deleted\n") ||
		!strings.Contains(out, "warning: namespace/kept still holds config/left: they are kept") {
		t.Fatalf("delete of a namespace holding a Config: %q %v", out, err)
	}
	if out, err := cli("", "get", "config", "left", "-n", "kept"); err != nil || !strings.Contains(out, "left") {
		t.Fatalf("the Config after its namespace's delete: %q %v", out, err)
	}

	// -n with manifests, as kubectl takes it: objects that name no
	// namespace go there (apply, diff, delete -f, validate), and one naming
	// another is refused, not written elsewhere than asked.
	const plain = "apiVersion: legion/v1\nkind: Config\nmetadata: {name: plain}\nspec: {text: x}\n"
	if out, err := cli(plain, "apply", "-f", "-", "-n", "other"); err != nil || out != "config/plain -n other created\n" {
		t.Fatalf("apply -n other: %q %v", out, err)
	}
	if out, err := cli(strings.Replace(plain, "text: x", "text: y", 1), "diff", "-f", "-", "-n", "other"); !strings.Contains(out, "+++ applied/Config/other/plain") || !strings.Contains(out, "-    text: x\n+    text: \"y\"\n") {
		t.Fatalf("diff -n other: %q %v", out, err)
	}
	if out, err := runLegion(t, plain, "validate", "-f", "-", "-n", "other"); err != nil || !strings.Contains(out, "namespace: other") {
		t.Fatalf("validate -n other: %q %v", out, err)
	}
	elsewhere := strings.Replace(plain, "{name: plain}", "{name: plain, namespace: shop}", 1)
	if out, err := cli(elsewhere, "apply", "-f", "-", "-n", "other"); err == nil ||
		!strings.Contains(err.Error(), `metadata.namespace: "shop", while the objects are asked for in namespace "other"`) {
		t.Fatalf("apply -n other of an object of namespace shop: %q %v", out, err)
	}
	if _, err := cli("", "get", "config", "plain", "-n", "shop"); err == nil {
		t.Fatal("the refused object was written in its own namespace")
	}
	if out, err := cli(plain, "delete", "-f", "-", "-n", "other"); err != nil || out != "config/plain -n other deleted\n" {
		t.Fatalf("delete -f -n other: %q %v", out, err)
	}

	// get by name takes no -A or -l, which it would otherwise ignore.
	if _, err := cli("", "get", "config", "settings", "-A"); err == nil || !strings.Contains(err.Error(), "not across all") {
		t.Errorf("get NAME -A: %v", err)
	}
	if _, err := cli("", "get", "config", "settings", "-l", "a=b"); err == nil || !strings.Contains(err.Error(), "a name and a label selector do not go together") {
		t.Errorf("get NAME -l: %v", err)
	}

	// The environment stands in for the flags.
	t.Setenv("LEGION_SERVER", addr)
	t.Setenv("LEGION_CREDENTIALS", admin)
	// No Namespace object is left, while default and kept hold objects:
	// the listing says what it lists.
	if out, err := runLegion(t, "", "get", "ns"); err != nil || !strings.Contains(out, "No Namespace objects found.\n") ||
		!strings.Contains(out, "objects live in default and in other namespaces without one") {
		t.Fatalf("get with LEGION_SERVER and LEGION_CREDENTIALS: %q %v", out, err)
	}
	t.Setenv("LEGION_CREDENTIALS", "")

	// Without credentials the CLI says what to do.
	if _, err := runLegion(t, "", "list", "configs", "--server", addr, "--credentials", ""); err == nil || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("no credentials: %v", err)
	}
}

func TestResolveKind(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]legion.Kind{
		"service": legion.KindService, "services": legion.KindService, "svc": legion.KindService,
		"Namespace": legion.KindNamespace, "ns": legion.KindNamespace, "networkpolicies": legion.KindNetworkPolicy,
		"netpol": legion.KindNetworkPolicy, "cronjobs": legion.KindCronJob, "cj": legion.KindCronJob,
		"imagepolicy": legion.KindImagePolicy, "tasks": legion.KindTask,
	} {
		got, err := resolveKind(in)
		if err != nil || got != want {
			t.Errorf("resolveKind(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// A kind not known is refused with the ones that are, so a typo
	// shows its fix.
	if _, err := resolveKind("servces"); err == nil || !strings.Contains(err.Error(), `unknown kind "servces": expected one of configs, cronjobs,`) ||
		!strings.Contains(err.Error(), " services, tasks, volumes") || !strings.Contains(err.Error(), "short name (svc,") {
		t.Errorf("resolveKind(servces): %v, want the kinds named", err)
	}
	// Kubernetes' kinds are refused, saying which of Legion's stands for
	// each: a kubectl user types them by habit.
	for in, says := range map[string]string{
		"pods": "a pod is a task's, which Legion makes from a Service or Job: legion get tasks", "po": "legion get tasks",
		"deployments": "a Deployment is a Service here: legion get services", "ds": "a DaemonSet is a Service of mode global here: legion get services",
		"statefulset": "a StatefulSet is a Service of mode stateful here: legion get services", "configmaps": "a ConfigMap is a Config here: legion get configs",
		"ingresses": "an Ingress is a Route here: legion get routes", "pvc": "a PersistentVolumeClaim is a Volume here: legion get volumes",
		"events": "events are not objects here: legion events (-n NAMESPACE, -f to follow)",
	} {
		if _, err := resolveKind(in); err == nil || !strings.Contains(err.Error(), `unknown kind "`+in+`"`) || !strings.HasSuffix(err.Error(), says) &&
			!strings.Contains(err.Error(), "; "+says) {
			t.Errorf("resolveKind(%s): %v, want it to say %q", in, err, says)
		}
	}
	if _, err := resolveKind("servces"); err == nil || strings.Contains(err.Error(), ";") {
		t.Errorf("resolveKind(servces): %v, want no Kubernetes hint", err)
	}
}

func TestUnifiedDiff(t *testing.T) {
	t.Parallel()
	a := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n"
	b := "a\nb\nc\nD\ne\nf\ng\nh\ni\nj\nk\nl\n"
	want := `--- x
+++ y
@@ -1,7 +1,7 @@
 a
 b
 c
-d
+D
 e
 f
 g
@@ -9,3 +9,4 @@
 i
 j
 k
+l
`
	if diff := cmp.Diff(want, unifiedDiff("x", "y", a, b)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if got := unifiedDiff("x", "y", a, a); got != "" {
		t.Fatalf("equal inputs: %q", got)
	}
	if got := unifiedDiff("x", "y", "", "new\n"); got != "--- x\n+++ y\n@@ -0,0 +1,1 @@\n+new\n" {
		t.Fatalf("creation: %q", got)
	}
}

// The daemon command serves until its context ends (as SIGTERM ends it),
// then closes its store so the directory opens again at once.
func TestDaemonStopsCleanly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := testaddr.Loopback(t)
	t.Cleanup(func() { removeContainers(dir) })
	run := filepath.Join(t.TempDir(), "run") // not the default, which outlives the test
	for round := range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs([]string{"daemon", "--data-dir", dir, "--run-dir", run, "--listen", addr})
		done := make(chan error, 1)
		go func() { done <- root.ExecuteContext(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		args := []string{"status", "--server", addr}
		want := "belongs to no cluster"
		if round == 1 {
			// Back from its disk; the only voter elects itself at once.
			args = append(args, "--credentials", filepath.Join(dir, server.AdminFile))
			want = "Leader  voter"
		}
		for {
			o, err := runLegion(t, "", args...)
			if err == nil && strings.Contains(o, want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: daemon never answered: %q %v\n%s", round, o, err, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if round == 0 {
			if _, err := runLegion(t, "", "init", "--server", addr); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("round %d: daemon ended with %v", round, err)
		}
	}
}

// get all lists a namespace's services, jobs, cron jobs and tasks, a
// table each, named kind/name as kubectl's get all names them; -o name
// lists them all; a namespace with none says so.
func TestGetAll(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("web", "")+`---
apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "0 3 * * *"
  job: {pod: {containers: [{name: c, image: localhost/hello:1, pullPolicy: never}]}}
`)
	waitTaskOf(ctx, t, n, "web", func(*legion.Task) bool { return true })
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	out, err := runLegion(t, "", append([]string{"get", "all"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	at := -1
	for _, want := range []string{"service/web ", "\n\nNAME ", "cronjob/nightly ", "\n\nNAME ", "task/web-1-1 "} {
		i := strings.Index(out[at+1:], want)
		if i < 0 {
			t.Fatalf("get all: %q missing, or out of order:\n%s", want, out)
		}
		at += 1 + i
	}
	if out, err := runLegion(t, "", append([]string{"get", "all", "-o", "name"}, flags...)...); err != nil ||
		!strings.Contains(out, "service/web\ncronjob/nightly\ntask/web-1-1\n") {
		t.Errorf("get all -o name: %v\n%s", err, out)
	}
	if out, err := runLegion(t, "", append([]string{"get", "all", "-n", "empty"}, flags...)...); err != nil || out != "No services, jobs, cron jobs or tasks found.\n" {
		t.Errorf("get all of an empty namespace: %v %q", err, out)
	}
	if _, err := runLegion(t, "", append([]string{"get", "all", "web"}, flags...)...); err == nil || !strings.Contains(err.Error(), "takes no NAME") {
		t.Errorf("get all NAME: %v, want refused", err)
	}
	// kubectl's list of kinds: each kind's table, or each kind's object
	// of a name; none of any says which kinds.
	if out, err := runLegion(t, "", append([]string{"get", "cj,svc,cronjobs", "-o", "name"}, flags...)...); err != nil || out != "cronjob/nightly\nservice/web\n" {
		t.Errorf("get cj,svc,cronjobs -o name: %v %q", err, out)
	}
	if out, err := runLegion(t, "", append([]string{"get", "svc,no"}, flags...)...); err != nil || !strings.Contains(out, "service/web ") || !strings.Contains(out, "\n\nNAME ") || !strings.Contains(out, "node/") {
		t.Errorf("get svc,no: %v\n%s", err, out)
	}
	if out, err := runLegion(t, "", append([]string{"get", "svc,cj", "web", "-o", "name"}, flags...)...); err == nil || out != "service/web\n" || !strings.Contains(err.Error(), "CronJob default/web: not found") {
		t.Errorf("get svc,cj web: %v %q, want service/web and cronjob/web not found", err, out)
	}
	if out, _ := runLegion(t, "", append([]string{"get", "svc,cj", "web"}, flags...)...); !strings.Contains(out, "\nservice/web ") {
		t.Errorf("get svc,cj web: the table names web without its kind, though two kinds were asked:\n%s", out)
	}
	if out, err := runLegion(t, "", append([]string{"get", "cfg,secrets"}, flags...)...); err != nil || out != "No configs or secrets found.\n" {
		t.Errorf("get cfg,secrets of none: %v %q", err, out)
	}
	for args, want := range map[string]string{"get svc,cfg -w": "a watch follows one kind", "get svc,bogus": `unknown kind "bogus"`} {
		if _, err := runLegion(t, "", append(strings.Fields(args), flags...)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("legion %s: %v, want %q", args, err, want)
		}
	}

	// get -w, kubectl's watch: the listing, then each change, here of
	// the one service named.
	if _, err := runLegion(t, helloApp("other", ""), append([]string{"apply", "-f", "-"}, flags...)...); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	watched := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- rootWith(watched, watched, append([]string{"get", "services", "web", "-w"}, flags...)...).ExecuteContext(wctx)
	}()
	waitFor(t, "the listing of web", func() bool { return strings.Contains(watched.String(), "web") })
	if _, err := runLegion(t, "", append([]string{"scale", "web", "2"}, flags...)...); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "web's change", func() bool { return strings.Contains(watched.String(), "/2") })
	stop()
	<-done
	if strings.Contains(watched.String(), "other") {
		t.Errorf("get services web -w showed another service:\n%s", watched.String())
	}
	if _, err := runLegion(t, "", append([]string{"get", "all", "-w"}, flags...)...); err == nil || !strings.Contains(err.Error(), "a watch follows one kind") {
		t.Errorf("get all -w: %v, want refused", err)
	}
}

// delete takes kubectl's forms: several names, KIND/NAME, and a label
// selector; a name beside a selector, or a kind alone, is refused with
// nothing deleted.
// delete --dry-run says what the delete would do, refuses what it would
// refuse, and deletes nothing; kubectl's --dry-run=client is refused
// saying what a dry run here is.
func TestDeleteDryRun(t *testing.T) {
	t.Parallel()
	_, run := initDaemon(t)
	manifest := `apiVersion: legion/v1
kind: Config
metadata: {name: settings}
spec: {text: "color: blue"}
---
apiVersion: legion/v1
kind: Config
metadata: {name: spare}
spec: {text: "unused"}
---
apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 1
  pod: {containers: [{name: c, image: web:1, env: [{name: COLOR, config: settings}]}]}
`
	if out, err := run(manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	// What a run printed and its error, as one text.
	said := func(out string, err error) string {
		if err != nil {
			return out + "\n" + err.Error()
		}
		return out
	}
	out, err := run("", "delete", "config", "spare", "--dry-run")
	if err != nil || strings.TrimSpace(out) != "config/spare deleted (dry run)" {
		t.Errorf("delete config spare --dry-run: %v\n%s", err, out)
	}
	out, err = run("", "delete", "config", "settings", "--dry-run=server")
	if err == nil || !strings.Contains(said(out, err), "in use by") {
		t.Errorf("delete config settings --dry-run=server, which web uses: %v\n%s\nwant the refusal of the delete", err, out)
	}
	// The manifest's deletes one after the other: web first, and then
	// nothing uses settings any more.
	out, err = run(manifest, "delete", "-f", "-", "--dry-run")
	if err != nil || !strings.Contains(out, "service/web deleted (dry run)\nconfig/settings deleted (dry run)\nconfig/spare deleted (dry run)") {
		t.Errorf("delete -f --dry-run: %v\n%s\nwant web, then settings and spare said deleted", err, out)
	}
	out, err = run("", "delete", "config", "absent", "--dry-run")
	if err == nil || !strings.Contains(said(out, err), "not found") {
		t.Errorf("delete config absent --dry-run: %v\n%s", err, out)
	}
	out, err = run("", "delete", "config", "spare", "--dry-run=client")
	if err == nil || !strings.Contains(said(out, err), "always has the cluster check") {
		t.Errorf("delete --dry-run=client: %v\n%s\nwant it refused saying what a dry run here is", err, out)
	}
	out, err = run("", "get", "svc,cfg", "-o", "name")
	if err != nil || !strings.Contains(out, "service/web") || !strings.Contains(out, "config/settings") || !strings.Contains(out, "config/spare") {
		t.Fatalf("after the dry runs: %v\n%s\nwant every object still there", err, out)
	}
}

// A manager from before dry runs of deletes does not know CheckDelete:
// the dry run says so and stops, and never falls back to a delete.
func TestDeleteDryRunOnAnOlderManager(t *testing.T) {
	t.Parallel()
	flags := fakeManager(t, scriptedVolumes{})
	_, err := runLegion(t, "", append([]string{"delete", "config", "a", "b", "--dry-run"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "config/a: the manager predates dry runs of deletes") || strings.Contains(err.Error(), "config/b") {
		t.Fatalf("delete --dry-run through an older manager: %v, want it to stop at the first, saying the manager predates dry runs", err)
	}
}

func TestDeleteByNamesAndLabels(t *testing.T) {
	t.Parallel()
	n := startCluster(t)
	ctx := context.Background()
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }
	var objs []legion.Object
	for _, c := range []struct{ name, tier string }{{"a", "x"}, {"b", "x"}, {"c", "y"}, {"d", "x"}, {"e", "y"}} {
		o, _ := legion.New(legion.KindConfig)
		o.GetMetadata().Name, o.GetMetadata().Labels = c.name, map[string]string{"tier": c.tier}
		o.(*legion.Config).Spec.Text = c.name
		objs = append(objs, o)
	}
	if _, err := n.Client.Apply(ctx, objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	left := func() []string {
		t.Helper()
		all, _, err := n.Client.List(ctx, legion.KindConfig, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range all {
			names = append(names, o.GetMetadata().Name)
		}
		return names
	}
	for _, bad := range [][]string{{"delete", "config"}, {"delete", "config", "a", "-l", "tier=x"}, {"delete", "config/a", "b"},
		{"delete", "config", "a", "--all"}, {"delete", "config", "--all", "-l", "tier=x"}, {"delete", "config/a", "--all"}} {
		if out, err := run(bad...); err == nil {
			t.Errorf("%v accepted:\n%s", bad, out)
		}
	}
	if got := left(); !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("a refused delete deleted: left %v", got)
	}
	if out, err := run("delete", "cfg", "a", "b"); err != nil || !strings.Contains(out, "config/a deleted\nconfig/b deleted") {
		t.Fatalf("delete cfg a b: %v\n%s", err, out)
	}
	if out, err := run("delete", "config/c"); err != nil || !strings.Contains(out, "config/c deleted") {
		t.Fatalf("delete config/c: %v\n%s", err, out)
	}
	if out, err := run("delete", "configs", "-l", "tier=x"); err != nil || !strings.Contains(out, "config/d deleted") {
		t.Fatalf("delete configs -l tier=x: %v\n%s", err, out)
	}
	if got := left(); !slices.Equal(got, []string{"e"}) {
		t.Fatalf("after the deletes: left %v, want e", got)
	}
	// kubectl's --ignore-not-found: what is gone already is what was
	// asked; without it, a name not found fails the delete.
	if out, err := run("delete", "config", "a", "e", "--ignore-not-found"); err != nil || out != "config/e deleted\n" {
		t.Fatalf("delete config a e --ignore-not-found: %v %q", err, out)
	}
	if _, err := run("delete", "config", "a"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("delete of a config not there: %v", err)
	}
	if _, err := n.Client.Apply(ctx, objs[:2], client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := run("delete", "configs", "--all"); err != nil || out != "config/a deleted\nconfig/b deleted\n" || len(left()) != 0 {
		t.Fatalf("delete configs --all: %v %q, left %v", err, out, left())
	}

	// kubectl's kinds listed with commas: by label, and by name (each
	// kind's object of the name; one not there is named).
	if _, err := n.Client.Apply(ctx, objs[:3], client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := run("delete", "cfg,secrets", "-l", "tier=x"); err != nil || out != "config/a deleted\nconfig/b deleted\n" {
		t.Fatalf("delete cfg,secrets -l tier=x: %v %q", err, out)
	}
	out, err := run("delete", "secret,cfg", "c")
	if out != "config/c deleted\n" || err == nil || !strings.Contains(err.Error(), "deleting secret/c") || len(left()) != 0 {
		t.Fatalf("delete secret,cfg c: %v %q, left %v", err, out, left())
	}
	if _, err := run("delete", "all,cfg", "c"); err == nil || !strings.Contains(err.Error(), "all stands for every workload of a namespace") {
		t.Fatalf("delete all,cfg c: %v", err)
	}
	if out, err := run("delete", "all", "-l", "tier=x"); err != nil || out != "No services, jobs, cron jobs or tasks with tier=x found.\n" {
		t.Fatalf("delete all -l of nothing: %v %q", err, out)
	}
}

// Deleting a stateful Service says which Volumes its claims made are
// kept, and how to remove them; another Service's are not named.
func TestDeleteServiceNamesItsKeptVolumes(t *testing.T) {
	s, dir := startDaemon(t)
	flags := []string{"--server", s.Addr(), "--credentials", filepath.Join(dir, server.AdminFile)}
	if out, err := runLegion(t, "", "init", "--server", s.Addr()); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	manifest := `apiVersion: legion/v1
kind: Service
metadata: {name: db}
spec:
  mode: stateful
  replicas: 2
  pod:
    containers: [{name: c, image: localhost/db:1, volumeMounts: [{name: data, path: /data}]}]
    volumes: [{name: data, claim: {size: 1Gi}}]
---
apiVersion: legion/v1
kind: Volume
metadata: {name: data-db-0, labels: {legion.service: db, legion.ordinal: "0"}}
spec: {size: 1Gi}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: data-db-1, labels: {legion.service: db, legion.ordinal: "1"}}
spec: {size: 1Gi}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: data-other-0, labels: {legion.service: other, legion.ordinal: "0"}}
spec: {size: 1Gi}
`
	if out, err := runLegion(t, manifest, append([]string{"apply", "-f", "-"}, flags...)...); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	out, err := runLegion(t, "", append([]string{"delete", "service", "db"}, flags...)...)
	if err != nil {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	want := "note: service/db's volumes are kept, with their data: data-db-0, data-db-1 (applying the service again gives each ordinal its own back; legion delete volume NAME -n default removes one and its data)"
	if !strings.Contains(out, want) || strings.Contains(out, "data-other-0") {
		t.Errorf("delete service db said:\n%s\nwant %q", out, want)
	}
	out, err = runLegion(t, "", append([]string{"delete", "volume", "data-db-0"}, flags...)...)
	if err != nil || strings.Contains(out, "note:") {
		t.Errorf("deleting a volume: %v\n%s", err, out)
	}
}

// kubectl's and docker's names for what Legion calls otherwise are
// answered with Legion's.
func TestKubectlNamesSuggestLegions(t *testing.T) {
	for arg, want := range map[string]string{"cluster-info": "status", "info": "status", "run": "create", "ps": "tasks"} {
		_, err := runLegion(t, "", arg)
		if err == nil || !strings.Contains(err.Error(), "Did you mean this?\n") || !strings.Contains(err.Error(), "\t"+want+"\n") {
			t.Errorf("legion %s: %v, want a suggestion of %s", arg, err, want)
		}
	}
	// docker service's commands name Legion's, whatever flags follow.
	for args, want := range map[string]string{
		"service ls":                   "docker service ls is legion get services here",
		"service update --image x web": "docker service update is legion set image NAME CONTAINER=IMAGE",
		"service create --name web x":  "docker service create is legion create service NAME --image IMAGE here",
		"service frob":                 "legion has no service command: each of docker service's create, inspect, logs, ls, ps, rm, rollback, scale, update names",
		"image pull nginx:1":           "a node pulls an image when a task of it needs it",
		// and docker's and kubectl's other commands, and subcommands of
		// Legion's own.
		"config":                               "kubectl config's contexts are legion context, and docker config's Configs are legion get, create, describe and delete config",
		"config use-context prod":              "kubectl config use-context is legion context use NAME here",
		"config ls":                            "docker config ls is legion get configs here",
		"secret create pw -":                   "docker secret create is legion create secret NAME FILE here",
		"swarm join-token worker":              "docker swarm join-token is legion token show worker|manager",
		"swarm":                                "legion has no swarm command: each of docker swarm's ca, init, join, join-token, leave, unlock, unlock-key, update names the command that does it here (legion swarm ca)",
		"annotate svc/web a=b":                 "kubectl annotate is not a command here: Legion objects have labels, not annotations: legion label KIND/NAME KEY=VALUE",
		"patch svc web -p {}":                  "kubectl patch is not a command here: legion edit KIND NAME",
		"rollout pause web":                    "kubectl rollout pause is not a thing here: an update goes on until it completes",
		"rollout resume web":                   "kubectl rollout resume is a change to the spec here",
		"node ps n1":                           "docker node ps is legion describe node NODE here (its tasks)",
		"cordon n1":                            "kubectl cordon is not a command here: legion node pause NODE",
		"api-versions":                         "kubectl api-versions is not a command here: every object is legion/v1",
		"uncordon n1":                          "kubectl uncordon is not a command here: legion node activate NODE",
		"drain n1 --ignore-daemonsets":         "kubectl drain is not a command here: legion node drain NODE",
		"taint nodes n1 k=v:NoSchedule":        "kubectl taint is not a command here: legion node taint NODE KEY[=VALUE]:EFFECT",
		"network ls":                           "docker network is not a command here: a cluster's pods share one network",
		"replace -f web.yaml":                  "kubectl replace is not a command here: legion apply -f FILE sets each object's labels and spec",
		"stats":                                "docker stats is not a command here: legion top",
		"debug -it web-1-1 --image=busybox":    "kubectl debug is not a command here: legion exec -it TASK -- sh",
		"proxy --port 8001":                    "kubectl proxy is not a command here: the API is gRPC with mutual TLS",
		"stack config -c compose.yaml":         "docker stack config is legion stack convert -c FILE STACK here",
		"volume create data":                   "docker volume create is a Volume's manifest here",
		"volume rm data":                       "docker volume rm is legion delete volume NAME here",
		"image prune -a":                       "docker image prune is done by each node's agent here",
		"context create prod --docker host=x":  "docker context create is legion context set NAME --server ADDR",
		"rollout undo svc/web --to-revision=2": "a service keeps the one spec it had before its last update, not numbered revisions",
		"rollout history web --revision 1":     "legion rollout history SERVICE shows it",
		"images":                               "docker images is not a command here: legion image ls",
		"pull nginx:1":                         "docker pull is not a command here: a node pulls an image when a task of it needs it",
		"build -t web .":                       "docker build is not a command here: Legion runs images and does not build or push them",
		"push web:1":                           "docker push is not a command here: Legion runs images and does not build or push them",
		"save -o web.tar web:1":                "docker save is not a command here: Legion does not write image archives",
		"load -i web.tar":                      "docker load is not a command here: legion image load FILE",
		"stop web":                             "docker stop is not a command here: legion scale SERVICE=0",
		"start web":                            "docker start is not a command here: legion scale SERVICE=N",
		"restart web":                          "docker restart is not a command here: legion rollout restart SERVICE",
		"kill web-1-1":                         "docker kill is not a command here: legion delete task TASK",
		"rm -f web":                            "docker rm is not a command here: legion delete KIND NAME",
		"compose up -d":                        "docker compose is not a command here: legion up DIR|FILE",
		"system prune -a":                      "docker system is not a command here: legion status",
		"login registry.example":               "docker login is not a command here: a registry's login is a Secret",
		"logout registry.example":              "docker logout is not a command here",
		"get endpoints web":                    "unknown kind \"endpoints\": expected one of",
		"get ep":                               "; a Service's endpoints are its ready tasks here: legion describe service NAME, or legion tasks NAME -o wide",
	} {
		if _, err := runLegion(t, "", strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("legion %s: %v, want %q", args, err, want)
		}
	}
}

// kubectl delete's flags: --wait=false is what a delete does here; the
// others are refused saying why, before any call.
func TestDeleteTakesKubectlFlags(t *testing.T) {
	t.Parallel()
	for args, says := range map[string]string{
		"delete svc web --wait":                     "a delete here returns once the object is gone from the store",
		"delete svc web --grace-period=0 --force":   "stopGracePeriod, set in its spec",
		"delete task web-1-1 --force":               "a delete here is never forced",
		"delete svc web --now":                      "stopGracePeriod, set in its spec, not per delete",
		"delete svc web --wait=false --server none": "", // taken: it fails only to connect
	} {
		_, err := runLegion(t, "", strings.Fields(args)...)
		if says == "" {
			if err == nil || strings.Contains(err.Error(), "--wait") {
				t.Errorf("legion %s: %v, want --wait=false taken", args, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want an error containing %q", args, err, says)
		}
	}
}

// delete all deletes a service without its tasks, which stop with it
// rather than each saying that its slot's next task starts; a task told
// to stop already says why instead.
func TestDeleteAllLeavesTasksToTheirOwner(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("web", ""))
	waitReadyTasks(ctx, t, n, "web", 1)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	out, err := runLegion(t, "", append([]string{"delete", "all", "--all"}, flags...)...)
	if err != nil || out != "service/web deleted\n" {
		t.Fatalf("delete all --all: %v %q, want the service alone deleted", err, out)
	}
}

// delete says what became of a task: deleted once ended, stopping when a
// node runs it, and, when told to stop before, why.
func TestDeletedLine(t *testing.T) {
	task := func(desired, state legion.TaskState, why string) legion.Object {
		return &legion.Task{Header: legion.Header{Kind: legion.KindTask, Metadata: legion.Metadata{Name: "web-1-1", Namespace: legion.DefaultNamespace}},
			Spec: legion.TaskSpec{DesiredState: desired, StopReason: why}, Status: legion.TaskStatus{State: state}}
	}
	for _, tc := range []struct {
		gone legion.Object
		want string
	}{
		{task(legion.TaskShutdown, legion.TaskShutdown, "deleted"), "task/web-1-1 deleted"},
		{task(legion.TaskShutdown, legion.TaskRunning, "deleted"), "task/web-1-1 stopping: its slot's next task starts once it has stopped"},
		{task(legion.TaskShutdown, legion.TaskRunning, "service web is gone"), "task/web-1-1 stopping already (service web is gone)"},
		{task(legion.TaskShutdown, legion.TaskRunning, "updated"), "task/web-1-1 stopping already (updated)"},
		{&legion.Config{Header: legion.Header{Kind: legion.KindConfig, Metadata: legion.Metadata{Name: "c", Namespace: "shop"}}}, "config/c -n shop deleted"},
		{&legion.Node{Header: legion.Header{Kind: legion.KindNode, Metadata: legion.Metadata{Name: "w1"}}, Spec: legion.NodeSpec{Role: legion.RoleWorker}}, "node/w1 deleted"},
		{&legion.Node{Header: legion.Header{Kind: legion.KindNode, Metadata: legion.Metadata{Name: "m2"}}, Spec: legion.NodeSpec{Role: legion.RoleManager}},
			"node/m2 deleted: its certificates are refused, but it held the cluster's CA key and could still sign itself one under another name; legion ca rotate"},
	} {
		if got := deletedLine(tc.gone); !strings.HasPrefix(got, tc.want) {
			t.Errorf("deletedLine: %q, want it to start %q", got, tc.want)
		}
	}
}

func TestWithoutOwnedTasks(t *testing.T) {
	svc := &legion.Service{Header: legion.Header{Kind: legion.KindService, Metadata: legion.Metadata{Name: "web", Namespace: "shop"}}}
	task := func(ns, owner string) legion.Object {
		return &legion.Task{Header: legion.Header{Kind: legion.KindTask, Metadata: legion.Metadata{Name: owner + "-1-1", Namespace: ns}},
			Spec: legion.TaskSpec{Owner: legion.Owner{Kind: legion.KindService, Name: owner}}}
	}
	got := withoutOwnedTasks([]legion.Object{svc, task("shop", "web"), task("other", "web"), task("shop", "api")})
	var names []string
	for _, o := range got {
		names = append(names, o.GetMetadata().Namespace+"/"+o.GetMetadata().Name)
	}
	if want := []string{"shop/web", "other/web-1-1", "shop/api-1-1"}; !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
}
