package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/compose"
	"github.com/spf13/cobra"
)

// fakeCluster is an in-memory stackClient recording its writes.
type fakeCluster struct {
	objs   map[string]legion.Object
	writes []string
}

func newFakeCluster(objs ...legion.Object) *fakeCluster {
	f := &fakeCluster{objs: map[string]legion.Object{}}
	for _, o := range objs {
		f.objs[legion.ObjectKey(o)] = o
	}
	return f
}

func (f *fakeCluster) Apply(_ context.Context, objs []legion.Object) ([]string, error) {
	var outcomes []string
	for _, o := range objs {
		outcome := client.Created
		if _, ok := f.objs[legion.ObjectKey(o)]; ok {
			outcome = client.Updated
		}
		f.objs[legion.ObjectKey(o)] = o
		f.writes = append(f.writes, "apply "+legion.ObjectKey(o))
		outcomes = append(outcomes, outcome)
	}
	return outcomes, nil
}

func (f *fakeCluster) List(_ context.Context, kind legion.Kind, ns string, sel map[string]string) ([]legion.Object, error) {
	var out []legion.Object
	for _, o := range f.objs {
		m := o.GetMetadata()
		if o.GetKind() == kind && (ns == "" || m.Namespace == ns) && legion.MatchLabels(sel, m.Labels) {
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b legion.Object) int { return strings.Compare(legion.ObjectKey(a), legion.ObjectKey(b)) })
	return out, nil
}

func (f *fakeCluster) FollowRollout(_ context.Context, out io.Writer, ns, name string, _ time.Duration) error {
	f.writes = append(f.writes, "follow "+legion.Key(legion.KindService, ns, name))
	return nil
}

func (f *fakeCluster) FollowJob(_ context.Context, out io.Writer, ns, name string, _ time.Duration) error {
	f.writes = append(f.writes, "follow "+legion.Key(legion.KindJob, ns, name))
	return nil
}

func (f *fakeCluster) Delete(_ context.Context, kind legion.Kind, ns, name string) error {
	key := legion.Key(kind, ns, name)
	delete(f.objs, key)
	f.writes = append(f.writes, "delete "+key)
	return nil
}

const stackFile = `
services:
  web:
    image: nginx:1.25
    ports: ["8080:80"]
    secrets: [db_password]
    privileged: true
  db:
    image: postgres:${PG_VERSION:-16}
    volumes: [db_data:/var/lib/postgresql/data]
secrets:
  db_password:
    file: ./db_password.txt
volumes:
  db_data: {}
`

func writeStack(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "compose.yaml"), []byte(stackFile), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "db_password.txt"), []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "compose.yaml")
}

func runStack(t *testing.T, c stackClient, args ...string) (string, string, error) {
	t.Helper()
	return runStackIn(t, c, "", args...)
}

func runStackIn(t *testing.T, c stackClient, stdin string, args ...string) (string, string, error) {
	t.Helper()
	deps := stackDeps{
		connect: func(*cobra.Command) (stackClient, error) { return c, nil },
		environ: func() []string { return []string{"PG_VERSION=15", "HOME=/root"} },
		stdin:   strings.NewReader(stdin),
	}
	root := &cobra.Command{Use: "legion", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(newStackCommand(deps))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"stack"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

func TestStackConvert(t *testing.T) {
	t.Parallel()
	file := writeStack(t)
	out, errOut, err := runStack(t, nil, "convert", "-c", file, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut, "warning: services.web: not mapped, ignored: privileged (jails have no privileged mode)") {
		t.Errorf("stderr lacks the privileged warning:\n%s", errOut)
	}
	objs, err := legion.ParseManifest("convert", []byte(out))
	if err != nil {
		t.Fatalf("legion validate would refuse convert's output: %v\n%s", err, out)
	}
	var keys []string
	for _, o := range objs {
		keys = append(keys, legion.ObjectKey(o))
	}
	want := []string{"Secret/shop/db-password", "Volume/shop/db-data", "NetworkPolicy/shop/default", "Service/shop/db", "Service/shop/web"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	db := objs[3].(*legion.Service)
	if img := db.Spec.Pod.Containers[0].Image; img != "postgres:15" {
		t.Errorf("db image %q: the CLI's environment was not used", img)
	}
	secret := objs[0].(*legion.Secret)
	if string(secret.Spec.Data) != "s3cret" {
		t.Errorf("secret read %q from the file beside the compose file", secret.Spec.Data)
	}

	// legion validate takes the output unchanged, and prints it back the same.
	manifest := filepath.Join(t.TempDir(), "shop.yaml")
	if err := os.WriteFile(manifest, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	root := newRootCommand()
	var validated bytes.Buffer
	root.SetOut(&validated)
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"validate", "-f", manifest})
	if err := root.Execute(); err != nil {
		t.Fatalf("legion validate refuses convert's output: %v", err)
	}
	if diff := cmp.Diff(out, validated.String()); diff != "" {
		t.Errorf("legion validate normalises convert's output further (-convert +validate):\n%s", diff)
	}
}

func TestStackConvertStdinAndOverride(t *testing.T) {
	t.Parallel()
	base := writeStack(t)
	override := "services:\n  web:\n    deploy:\n      replicas: 5\n"
	out, _, err := runStackIn(t, nil, override, "convert", "-n", "shop-prod", "-c", base, "-c", "-", "shop")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := legion.ParseManifest("convert", []byte(out))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetMetadata().Namespace != "shop-prod" {
			t.Errorf("%s in namespace %q, want shop-prod", legion.DisplayName(o), o.GetMetadata().Namespace)
		}
		if svc, ok := o.(*legion.Service); ok && svc.Metadata.Name == "web" && *svc.Spec.Replicas != 5 {
			t.Errorf("web has %d replicas: the file from standard input did not override", *svc.Spec.Replicas)
		}
	}
}

func TestStackConvertStrict(t *testing.T) {
	t.Parallel()
	file := writeStack(t)
	out, _, err := runStack(t, nil, "convert", "--strict", "-c", file, "shop")
	if err == nil || !strings.Contains(err.Error(), "services.web: not mapped, ignored: privileged") {
		t.Fatalf("strict convert: got %v, want a refusal naming services.web's privileged", err)
	}
	if out != "" {
		t.Errorf("strict refusal printed objects:\n%s", out)
	}
}

func TestStackDeployPrune(t *testing.T) {
	t.Parallel()
	file := writeStack(t)
	stale := mustService("shop", "old", "shop")
	other := mustService("shop", "admin", "")
	c := newFakeCluster(stale, other)
	c.writes = nil
	out, _, err := runStack(t, c, "deploy", "--prune", "-c", file, "shop")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"apply Namespace//shop", "apply Secret/shop/db-password", "apply Volume/shop/db-data", "apply NetworkPolicy/shop/default",
		"apply Service/shop/db", "apply Service/shop/web", "delete Service/shop/old",
	}
	if diff := cmp.Diff(want, c.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if !strings.Contains(out, "service/old -n shop deleted") {
		t.Errorf("output does not say what was deleted:\n%s", out)
	}

	// Without --prune the stale service stays; the namespace, now there, is
	// not applied again.
	c = newFakeCluster(stale, other, c.objs["Namespace//shop"])
	_, errOut, err := runStack(t, c, "deploy", "-c", file, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(c.writes, "delete Service/shop/old") {
		t.Error("deploy without --prune deleted a service")
	}
	// ... and is said to: not of the stack's, admin is not named.
	if want := "note: service/old -n shop is in stack shop but no longer in its files: it keeps running (--prune deletes it)\n"; !strings.Contains(errOut, want) ||
		strings.Contains(errOut, "service/admin") {
		t.Errorf("deploy without --prune leaving a service the file no longer has said:\n%s\nwant %q", errOut, want)
	}
	if slices.Contains(c.writes, "apply Namespace//shop") {
		t.Error("deploy applied an existing namespace again")
	}
}

func TestStackRmKeepsVolumes(t *testing.T) {
	t.Parallel()
	file := writeStack(t)
	c := newFakeCluster()
	if _, _, err := runStack(t, c, "deploy", "-c", file, "shop"); err != nil {
		t.Fatal(err)
	}
	c.writes = nil
	if _, _, err := runStack(t, c, "rm", "shop"); err != nil {
		t.Fatal(err)
	}
	want := []string{"delete Service/shop/db", "delete Service/shop/web", "delete NetworkPolicy/shop/default", "delete Secret/shop/db-password"}
	if diff := cmp.Diff(want, c.writes); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	if _, ok := c.objs["Volume/shop/db-data"]; !ok {
		t.Error("stack rm deleted the volume")
	}
	if _, _, err := runStack(t, c, "rm", "shop"); err == nil {
		t.Error("removing a stack that is gone did not fail")
	}
}

func TestStackLsAndServices(t *testing.T) {
	t.Parallel()
	file := writeStack(t)
	c := newFakeCluster(mustService("tools", "gitea", "git"))
	if _, _, err := runStack(t, c, "deploy", "-c", file, "shop"); err != nil {
		t.Fatal(err)
	}
	out, _, err := runStack(t, c, "ls")
	if err != nil {
		t.Fatal(err)
	}
	want := "NAME  NAMESPACE  SERVICES\ngit   tools      1\nshop  shop       2\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("stack ls (-want +got):\n%s", diff)
	}
	out, _, err = runStack(t, c, "services", "shop")
	if err != nil {
		t.Fatal(err)
	}
	want = "NAME  MODE        REPLICAS  IMAGE        PORTS         UPDATE\ndb    replicated  0/1       postgres:15  -             -\nweb   replicated  0/1       nginx:1.25   8080->80/tcp  -\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("stack services (-want +got):\n%s", diff)
	}
}

func TestStackDeployNeedsCredentials(t *testing.T) {
	t.Setenv("LEGION_CREDENTIALS", "")
	file := writeStack(t)
	_, err := runLegion(t, "", "stack", "deploy", "-c", file, "shop")
	if err == nil || !strings.Contains(err.Error(), "no credentials") {
		t.Fatalf("deploy without credentials: got %v", err)
	}
}

// TestStackEndToEnd deploys, updates with --prune, lists and removes a
// stack on a real manager, through the Go client.
func TestStackEndToEnd(t *testing.T) {
	s, dir := startDaemon(t)
	flags := []string{"--server", s.Addr(), "--credentials", filepath.Join(dir, server.AdminFile)}
	if out, err := runLegion(t, "", "init", "--server", s.Addr()); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := runLegion(t, "", append(args, flags...)...)
		if err != nil {
			t.Fatalf("legion %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	t.Setenv("PG_VERSION", "15")
	file := writeStack(t)
	out := cli("stack", "deploy", "-c", file, "shop")
	for _, want := range []string{"namespace/shop created", "secret/db-password -n shop created", "service/web -n shop created", "warning: services.web: not mapped, ignored: privileged"} {
		if !strings.Contains(out, want) {
			t.Errorf("deploy output lacks %q:\n%s", want, out)
		}
	}
	if out := cli("stack", "ls"); !strings.Contains(out, "shop  shop       2") {
		t.Errorf("stack ls:\n%s", out)
	}
	if out := cli("stack", "services", "shop"); !strings.Contains(out, "db    replicated") || !strings.Contains(out, "postgres:15") {
		t.Errorf("stack services:\n%s", out)
	}
	// The images are not resolved offline, so the services have no tasks
	// yet: ps says so (TestStackPs shows the table).
	if out := cli("stack", "ps", "shop"); !strings.Contains(out, "No tasks found.") {
		t.Errorf("stack ps:\n%s", out)
	}

	// The file loses db: --prune deletes its Service, keeps its volume.
	smaller := strings.Replace(stackFile, "  db:\n    image: postgres:${PG_VERSION:-16}\n    volumes: [db_data:/var/lib/postgresql/data]\n", "", 1)
	if err := os.WriteFile(file, []byte(smaller), 0o644); err != nil {
		t.Fatal(err)
	}
	out = cli("stack", "deploy", "--prune", "-c", file, "shop")
	if !strings.Contains(out, "service/db -n shop deleted") || !strings.Contains(out, "service/web -n shop unchanged") || strings.Contains(out, "namespace/shop") {
		t.Errorf("deploy --prune:\n%s", out)
	}
	out = cli("stack", "rm", "shop")
	for _, want := range []string{"service/web -n shop deleted", "secret/db-password -n shop deleted", "namespace/shop kept: it still holds volume/db-data"} {
		if !strings.Contains(out, want) {
			t.Errorf("rm output lacks %q:\n%s", want, out)
		}
	}
	if out := cli("get", "volumes", "-n", "shop"); !strings.Contains(out, "db-data") {
		t.Errorf("stack rm did not keep the volume:\n%s", out)
	}
	if out := cli("stack", "ls"); strings.Contains(out, "shop") {
		t.Errorf("stack ls after rm:\n%s", out)
	}
}

// A stack the cluster refuses any of leaves none of itself behind: its
// objects go in one apply, admitted all or none. Here the namespace's
// quota of objects has room for the Secret and the Volume but not the
// Services; applied one by one, those two were made before the refusal.
func TestStackDeployIsAllOrNothing(t *testing.T) {
	s, dir := startDaemon(t)
	flags := []string{"--server", s.Addr(), "--credentials", filepath.Join(dir, server.AdminFile)}
	if out, err := runLegion(t, "", "init", "--server", s.Addr()); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	ns := "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: shop}\nspec: {quota: {objects: 2}}\n"
	if out, err := runLegion(t, ns, append([]string{"apply", "-f", "-"}, flags...)...); err != nil {
		t.Fatalf("apply namespace: %v\n%s", err, out)
	}
	file := writeStack(t)
	out, err := runLegion(t, "", append([]string{"stack", "deploy", "-c", file, "shop"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "over the quota of namespace shop: objects") {
		t.Fatalf("deploy past the quota: got %v\n%s", err, out)
	}
	if strings.Contains(out, "created") {
		t.Errorf("a refused deploy says it created something:\n%s", out)
	}
	for _, kind := range []string{"secrets", "volumes", "services"} {
		got, err := runLegion(t, "", append([]string{"get", kind, "-n", "shop", "-o", "name"}, flags...)...)
		if err != nil {
			t.Fatalf("get %s: %v\n%s", kind, err, got)
		}
		if strings.TrimSpace(got) != "" {
			t.Errorf("a refused deploy left %s:\n%s", kind, got)
		}
	}
}

func mustService(ns, name, stack string) legion.Object {
	o, _ := legion.New(legion.KindService)
	m := o.GetMetadata()
	m.Namespace, m.Name = ns, name
	if stack != "" {
		m.Labels = map[string]string{compose.StackLabel: stack}
	}
	return o
}

// stack rm deletes the namespace deploy made once nothing is left in it,
// and keeps one holding anything else or one the stack did not make.
func TestStackRmRemovesTheNamespaceItMadeWhenEmpty(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(file, []byte("services:\n  web: {image: nginx:1.25}\n  cache: {image: redis:7}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deploy := func(c *fakeCluster, args ...string) {
		t.Helper()
		if _, _, err := runStack(t, c, append([]string{"deploy", "-c", file}, args...)...); err != nil {
			t.Fatal(err)
		}
		c.writes = nil
	}
	plain := func(kind legion.Kind, ns, name string) legion.Object {
		o, _ := legion.New(kind)
		m := o.GetMetadata()
		m.Namespace, m.Name = ns, name
		return o
	}
	tests := []struct {
		name    string
		setup   func(c *fakeCluster)
		deleted bool
		says    string
	}{
		{name: "empty afterwards", setup: func(c *fakeCluster) { deploy(c, "shop") }, deleted: true, says: "namespace/shop deleted"},
		{name: "another object in it", setup: func(c *fakeCluster) {
			deploy(c, "shop")
			c.objs["Service/shop/admin"] = mustService("shop", "admin", "")
		}, says: "namespace/shop kept: it still holds service/admin"},
		{name: "a kept volume in it", setup: func(c *fakeCluster) {
			deploy(c, "shop")
			c.objs["Volume/shop/data"] = plain(legion.KindVolume, "shop", "data")
		}, says: "namespace/shop kept: it still holds volume/data"},
		{name: "made by the admin", setup: func(c *fakeCluster) {
			c.objs["Namespace//shop"] = plain(legion.KindNamespace, "", "shop")
			deploy(c, "shop")
		}, says: "namespace/shop kept: stack shop did not create it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newFakeCluster()
			tt.setup(c)
			out, _, err := runStack(t, c, "rm", "shop")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, tt.says) {
				t.Errorf("rm output lacks %q:\n%s", tt.says, out)
			}
			_, still := c.objs["Namespace//shop"]
			if still == tt.deleted {
				t.Errorf("namespace still there = %v, want %v; writes %v", still, !tt.deleted, c.writes)
			}
			if tt.deleted && c.writes[len(c.writes)-1] != "delete Namespace//shop" {
				t.Errorf("the namespace was not deleted last: %v", c.writes)
			}
		})
	}
}

func TestStackPs(t *testing.T) {
	t.Parallel()
	ago := time.Now().Add(-5*time.Minute - 10*time.Second)
	task := func(svc string, slot, num int, node string, state legion.TaskState, msg string) legion.Object {
		tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
			Metadata: legion.Metadata{Namespace: "shop", Name: fmt.Sprintf("%s-%d-%d", svc, slot, num), UID: fmt.Sprintf("00000000-0000-4000-8000-%012x", 0x1000*len(svc)+0x10*slot+num)}}}
		tk.Spec.Owner = legion.Owner{Kind: legion.KindService, Name: svc}
		tk.Spec.Slot, tk.Spec.Node, tk.Spec.DesiredState = slot, node, legion.TaskRunning
		tk.Spec.Pod.Containers = []legion.Container{{Name: svc, Image: svc + ":1"}}
		tk.Status.State, tk.Status.Message, tk.Status.Timestamp = state, msg, ago.Add(time.Duration(num)*time.Second)
		tk.Status.Ready = state == legion.TaskRunning && !strings.Contains(msg, "restarting")
		if state == legion.TaskFailed {
			tk.Spec.DesiredState = legion.TaskShutdown
		}
		return tk
	}
	c := newFakeCluster(
		mustService("shop", "web", "shop"), mustService("shop", "db", "shop"), mustService("shop", "admin", ""),
		task("web", 1, 1, "", legion.TaskPending, "waiting for db to be ready"),
		task("db", 1, 1, "n1", legion.TaskFailed, "container db exited with 1"),
		task("db", 1, 2, "n2", legion.TaskRunning, "probe ok"),
		task("admin", 1, 1, "n1", legion.TaskRunning, ""),
		task("web", 2, 1, "n2", legion.TaskRunning, "container web exited with 1: restarting in 2s (attempt 2)"),
		// Stopped when told, and a one-shot done: no error.
		task("db", 2, 1, "n1", legion.TaskShutdown, "stopped"),
		task("db", 3, 1, "n1", legion.TaskComplete, ""),
	)
	out, _, err := runStack(t, c, "ps", "shop")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ID            NAME     IMAGE  NODE  DESIRED STATE  CURRENT STATE    ERROR\n" +
		"000000002012  db-1-2   db:1   n2    running        running 5m ago   -\n" +
		"000000002011  db-1-1   db:1   n1    shutdown       failed 5m ago    container db exited with 1\n" +
		"000000002021  db-2-1   db:1   n1    running        shutdown 5m ago  -\n" +
		"000000002031  db-3-1   db:1   n1    running        complete 5m ago  -\n" +
		"000000003011  web-1-1  web:1  -     running        pending 5m ago   waiting for db to be ready\n" +
		"000000003021  web-2-1  web:1  n2    running        running 5m ago   container web exited with 1: restarting in 2s (attempt 2)\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("stack ps (-want +got):\n%s", diff)
	}
	js, _, err := runStack(t, c, "ps", "shop", "-o", "json")
	if err != nil || !strings.Contains(js, `"id": "00000000-0000-4000-8000-000000002012"`) {
		t.Errorf("stack ps -o json: %v, want the whole UID:\n%s", err, js)
	}
	if _, _, err := runStack(t, c, "ps", "nothere"); err == nil || !strings.Contains(err.Error(), "stack nothere: no services or jobs of it in namespace nothere") {
		t.Errorf("ps of a missing stack: %v", err)
	}
}

// Relative bind mounts are resolved against the compose file's directory,
// and --profile activates profiles.
func TestStackConvertBindMountsAndProfiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yaml")
	text := "services:\n  web:\n    image: nginx:1.25\n    volumes: ['./html:/usr/share/nginx/html:ro']\n  debug: {image: busybox:1, profiles: [debug]}\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args  []string
		debug bool
	}{{nil, false}, {[]string{"--profile", "debug"}, true}} {
		out, _, err := runStack(t, nil, append([]string{"convert", "-c", file}, append(tt.args, "shop")...)...)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := legion.ParseManifest("convert", []byte(out))
		if err != nil {
			t.Fatal(err)
		}
		var web *legion.Service
		names := map[string]bool{}
		for _, o := range objs {
			if s, ok := o.(*legion.Service); ok {
				names[s.Metadata.Name] = true
				if s.Metadata.Name == "web" {
					web = s
				}
			}
		}
		if names["debug"] != tt.debug {
			t.Errorf("%v: debug service deployed = %v, want %v", tt.args, names["debug"], tt.debug)
		}
		if web == nil || len(web.Spec.Pod.Volumes) != 1 || web.Spec.Pod.Volumes[0].HostPath == nil {
			t.Fatalf("web has no host path volume: %+v", web)
		}
		if got, want := web.Spec.Pod.Volumes[0].HostPath.Path, filepath.Join(dir, "html"); got != want {
			t.Errorf("host path %q, want %q", got, want)
		}
		if m := web.Spec.Pod.Containers[0].VolumeMounts; len(m) != 1 || !m[0].ReadOnly || m[0].Path != "/usr/share/nginx/html" {
			t.Errorf("mount %+v, want read-only at /usr/share/nginx/html", m)
		}
	}
}

// A stack with bind mounts is refused before anything is written unless
// its namespace allows hostPath; an admin's namespace that does takes it.
func TestStackDeployBindMountsNeedHostPath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(file, []byte("services:\n  web: {image: nginx:1.25, volumes: ['./html:/usr/share/nginx/html']}\n  db: {image: postgres:16}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newFakeCluster()
	_, _, err := runStack(t, c, "deploy", "-c", file, "shop")
	if err == nil || !strings.Contains(err.Error(), "the bind mounts of web (hostPath volumes) are not allowed in namespace shop: a cluster admin may add hostPath") {
		t.Fatalf("deploy into a new namespace: got %v, want a refusal naming web and the way out", err)
	}
	if len(c.writes) != 0 {
		t.Errorf("a refused deploy wrote %v", c.writes)
	}
	ns := &legion.Namespace{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNamespace, Metadata: legion.Metadata{Name: "shop"}},
		Spec: legion.NamespaceSpec{Security: legion.NamespaceSecurity{Allow: []string{legion.AllowHostPath}}}}
	c = newFakeCluster(ns)
	if _, _, err := runStack(t, c, "deploy", "-c", file, "shop"); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(c.writes, "apply Service/shop/web") {
		t.Errorf("writes %v lack web", c.writes)
	}
}

// A stack deployed where process-platform nodes may run it is told what
// they will not do of it, as apply tells: its limits, and the network
// policies its networks become. Jails nodes alone leave nothing to say.
func TestStackDeployWarnsOfWhatProcessNodesDoNotEnforce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yaml")
	if err := os.WriteFile(file, []byte(`
services:
  web:
    image: nginx:1.25
    deploy: {resources: {limits: {memory: 64M}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	node := func(name, runtime string) *legion.Node {
		n := &legion.Node{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNode, Metadata: legion.Metadata{Name: name}}}
		n.Status.State, n.Status.Runtime = legion.NodeReady, runtime
		return n
	}
	_, stderr, err := runStack(t, newFakeCluster(node("n1", legion.NodeRuntimeProcess), node("n2", legion.NodeRuntimeJails)), "deploy", "-c", file, "shop")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"warning: service/web -n shop: its resource limits are not enforced on process-platform nodes (n1)",
		"warning: networkpolicy/default -n shop: not enforced on process-platform nodes (n1)"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("deploy's warnings:\n%s\nwant %q", stderr, want)
		}
	}
	_, stderr, err = runStack(t, newFakeCluster(node("n2", legion.NodeRuntimeJails)), "deploy", "-c", file, "shop")
	if err != nil || strings.Contains(stderr, "warning:") {
		t.Fatalf("deploy on jails nodes: %v, warnings:\n%s", err, stderr)
	}
}

// A stack deployed again with a Secret's new value says, as apply does,
// which of its services' running tasks keep the value they started with.
func TestStackDeployWarnsThatRunningTasksKeepAnUpdatedSecret(t *testing.T) {
	t.Parallel()
	file := writeStack(t)
	c := newFakeCluster()
	if _, stderr, err := runStack(t, c, "deploy", "-c", file, "shop"); err != nil || strings.Contains(stderr, "keep the value") {
		t.Fatalf("first deploy: %v\n%s", err, stderr)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "db_password.txt"), []byte("n3w"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err := runStack(t, c, "deploy", "-c", file, "shop")
	if err != nil || !strings.Contains(stderr, "the tasks of service/web that already run keep the value they started with") {
		t.Fatalf("deploy with a new secret value: %v\n%s", err, stderr)
	}
}

// stack deploy --wait (docker's --detach=false) follows each service's
// rollout on a real node until its tasks are ready; docker's
// --with-registry-auth and --resolve-image other than always are refused
// before anything is applied.
func TestStackDeployWait(t *testing.T) {
	t.Parallel()
	n := startCluster(t)
	loadHello(context.Background(), t, n)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	file := filepath.Join(t.TempDir(), "compose.yaml")
	// w waits for a one-shot, migrate, which --wait counts done once it
	// has exited 0 (its restart policy none leaves it so).
	compose := `services:
  w:
    image: localhost/hello:1
    pull_policy: never
    command: ["-listen", "$$(LEGION_POD_IP):8080"]
    deploy: {replicas: 2}
    depends_on:
      migrate: {condition: service_completed_successfully}
  migrate:
    image: localhost/hello:1
    pull_policy: never
    command: ["-say", "migrated", "-exit", "0"]
`
	if err := os.WriteFile(file, []byte(compose), 0o600); err != nil {
		t.Fatal(err)
	}
	for args, says := range map[string]string{
		"--with-registry-auth":  "--with-registry-auth: nodes pull with the Secrets a pod names",
		"--resolve-image=never": "--resolve-image never: the leader always resolves each tag to a digest",
		"--timeout=1m":          "--timeout applies only with --wait",
	} {
		out, err := runLegion(t, "", append([]string{"stack", "deploy", "-c", file, "hi", args}, flags...)...)
		if err == nil || !strings.Contains(err.Error(), says) || strings.Contains(out, "created") {
			t.Errorf("stack deploy %s: %v, want it refused saying %q\n%s", args, err, says, out)
		}
	}
	out, err := runLegion(t, "", append([]string{"stack", "deploy", "-c", file, "hi", "--detach=false", "--resolve-image", "always", "--timeout", "2m"}, flags...)...)
	// migrate's rollout is done once its task runs the pod and is ready,
	// or has completed: which one the follow sees first is the machine's
	// speed (it exits at once).
	if err != nil || !strings.Contains(out, "service/w -n hi created") || !strings.Contains(out, "service hi/w: 2 of 2 tasks updated, 2 ready") ||
		!regexp.MustCompile(`service hi/migrate: 1 of 1 tasks updated, (1 ready|0 ready, 1 complete)\n`).MatchString(out) {
		t.Fatalf("stack deploy --detach=false: %v\n%s", err, out)
	}
	ready := 0
	tasks, _, err := n.Client.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: "hi"})
	for _, o := range tasks {
		if tk := o.(*legion.Task); tk.Status.Ready && tk.Spec.DesiredState == legion.TaskRunning {
			ready++
		}
	}
	if err != nil || ready != 2 {
		t.Errorf("after stack deploy --detach=false: %d ready tasks (%v), want 2", ready, err)
	}
	// The one-shot's slot is done, and the listing says so.
	var listing string
	waitFor(t, "get services to count migrate's slot complete", func() bool {
		listing, err = runLegion(t, "", append([]string{"get", "services", "-n", "hi"}, flags...)...)
		return err == nil && strings.Contains(listing, "0/1 (1 complete)")
	})
}

const jobStackFile = `
services:
  web:
    image: nginx:1.25
    depends_on:
      migrate: {condition: service_completed_successfully}
  migrate:
    image: registry.example/migrate:1
    deploy: {mode: replicated-job}
`

// A compose service in a job mode deploys as a Job: applied with the
// rest, followed by --wait after the services, pruned like a service
// once the files lose it (a CronJob's Jobs, unlabelled, never), and
// removed by stack rm.
func TestStackDeployJobs(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "compose.yaml")
	if err := os.WriteFile(file, []byte(jobStackFile), 0o644); err != nil {
		t.Fatal(err)
	}
	c := newFakeCluster(obj(legion.KindJob, "shop", "seed", "shop"), obj(legion.KindJob, "shop", "nightly-29000000", ""))
	if _, _, err := runStack(t, c, "deploy", "--prune", "--wait", "-c", file, "shop"); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"apply Namespace//shop", "apply NetworkPolicy/shop/default", "apply Service/shop/web", "apply Job/shop/migrate",
		"delete Job/shop/seed", "follow Service/shop/web", "follow Job/shop/migrate",
	}
	if diff := cmp.Diff(want, c.writes); diff != "" {
		t.Errorf("deploy writes (-want +got):\n%s", diff)
	}
	// ls, services and ps count and show the Job as the stack's, as
	// docker's count a job's service.
	task := obj(legion.KindTask, "shop", "migrate-1-1", "").(*legion.Task)
	task.Spec.Owner = legion.Owner{Kind: legion.KindJob, Name: "migrate"}
	task.Status.State = legion.TaskComplete
	c.objs[legion.ObjectKey(task)] = task
	if out, _, err := runStack(t, c, "ls"); err != nil || !regexp.MustCompile(`(?m)^shop\s+shop\s+2$`).MatchString(out) {
		t.Errorf("stack ls: %v\n%s", err, out)
	}
	if out, _, err := runStack(t, c, "services", "shop"); err != nil || !strings.Contains(out, "service/web") || !strings.Contains(out, "job/migrate") {
		t.Errorf("stack services: %v\n%s", err, out)
	}
	if out, _, err := runStack(t, c, "ps", "shop"); err != nil || !strings.Contains(out, "migrate-1-1") {
		t.Errorf("stack ps: %v\n%s", err, out)
	}
	c.writes = nil
	if _, _, err := runStack(t, c, "rm", "shop"); err != nil {
		t.Fatal(err)
	}
	// The namespace is kept: the CronJob's Job is still in it.
	want = []string{"delete Service/shop/web", "delete Job/shop/migrate", "delete NetworkPolicy/shop/default"}
	if diff := cmp.Diff(want, c.writes); diff != "" {
		t.Errorf("rm writes (-want +got):\n%s", diff)
	}
	if _, ok := c.objs["Job/shop/nightly-29000000"]; !ok {
		t.Error("a CronJob's Job was deleted with the stack")
	}
}

func obj(kind legion.Kind, ns, name, stack string) legion.Object {
	o, _ := legion.New(kind)
	m := o.GetMetadata()
	m.Namespace, m.Name = ns, name
	if stack != "" {
		m.Labels = map[string]string{compose.StackLabel: stack}
	}
	return o
}

// Deployed again, an unchanged Job is left as it is, even once it has
// finished; a finished Job changed is refused naming it, and nothing of
// the stack is written.
func TestStackDeployJobAgain(t *testing.T) {
	s, dir := startDaemon(t)
	flags := []string{"--server", s.Addr(), "--credentials", filepath.Join(dir, server.AdminFile)}
	if out, err := runLegion(t, "", "init", "--server", s.Addr()); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	file := filepath.Join(t.TempDir(), "compose.yaml")
	deploy := func(text string) (string, error) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return runLegion(t, "", append([]string{"stack", "deploy", "-c", file, "shop"}, flags...)...)
	}
	if out, err := deploy(jobStackFile); err != nil || !strings.Contains(out, "job/migrate -n shop created") {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	o, _, err := s.Store().Get(legion.KindJob, "shop", "migrate")
	if err != nil {
		t.Fatal(err)
	}
	j := o.(*legion.Job)
	j.Status.State = legion.JobComplete
	if _, _, err := s.Store().Put(context.Background(), j, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := deploy(jobStackFile); err != nil || !strings.Contains(out, "job/migrate -n shop unchanged") {
		t.Fatalf("deploy again: %v\n%s", err, out)
	}
	changed := strings.Replace(jobStackFile, "nginx:1.25", "nginx:1.26", 1)
	changed = strings.Replace(changed, "migrate:1", "migrate:2", 1)
	out, err := deploy(changed)
	if err == nil || !strings.Contains(err.Error(), "Job shop/migrate: it is complete") || !strings.Contains(err.Error(), "legion delete job migrate -n shop") {
		t.Fatalf("deploy of a changed finished job: %v\n%s", err, out)
	}
	if o, _, err := s.Store().Get(legion.KindService, "shop", "web"); err != nil || o.(*legion.Service).Spec.Pod.Containers[0].Image != "nginx:1.25" {
		t.Errorf("a refused deploy updated web: %v", err)
	}
}
