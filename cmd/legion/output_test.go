package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/golden"
)

// goldenOutput compares got with testdata/NAME.golden, or writes it with -update.
func goldenOutput(t *testing.T, name, got string) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name+".golden"), got)
}

// decode reads objects as the cluster stores them, without admission
// (tasks are the cluster's to write).
func decode(t *testing.T, manifest string) []legion.Object {
	t.Helper()
	docs, err := legion.Decode([]byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	var objs []legion.Object
	for _, d := range docs {
		if len(d.Errs) > 0 {
			t.Fatalf("document %d: %v", d.Index, d.Errs)
		}
		objs = append(objs, d.Object)
	}
	return objs
}

// fixtureNow is the time the fixtures' ages are taken at.
var fixtureNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *time.Time {
	t := fixtureNow.Add(-d)
	return &t
}

// fixtures are objects of every kind, with the status a running cluster
// gives them, by kind.
func fixtures(t *testing.T) map[legion.Kind][]legion.Object {
	t.Helper()
	objs := decode(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  mode: replicated
  replicas: 3
  pod: {containers: [{name: c, image: "nginx:1.25", ports: [{name: http, containerPort: 80}]}]}
  endpoint: {ports: [{name: http, port: 80, targetPort: http, protocol: tcp, publish: ingress, publishedPort: 8080}]}
---
apiVersion: legion/v1
kind: Service
metadata: {name: agent, namespace: shop}
spec:
  mode: global
  pod: {containers: [{name: c, image: "agent:5"}]}
---
apiVersion: legion/v1
kind: Node
metadata: {name: m1}
spec: {role: manager, availability: active}
---
apiVersion: legion/v1
kind: Node
metadata: {name: w1}
spec: {role: worker, availability: drain}
---
apiVersion: legion/v1
kind: Task
metadata: {name: web-1-a, namespace: shop}
spec:
  owner: {kind: Service, name: web}
  slot: 1
  node: w1
  desiredState: running
  pod: {containers: [{name: c, image: "nginx:1.25"}, {name: log, image: "busybox:1"}]}
---
apiVersion: legion/v1
kind: Task
metadata: {name: web-2-b, namespace: shop}
spec:
  owner: {kind: Service, name: web}
  slot: 2
  desiredState: running
  pod: {containers: [{name: c, image: "nginx:1.25"}]}
---
apiVersion: legion/v1
kind: Job
metadata: {name: migrate, namespace: shop}
spec:
  mode: replicated
  completions: 3
  pod: {containers: [{name: c, image: "migrate:2"}]}
---
apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly, namespace: shop}
spec:
  schedule: "0 3 * * *"
  concurrencyPolicy: forbid
  job: {pod: {containers: [{name: c, image: "backup:1"}]}}
---
apiVersion: legion/v1
kind: CronJob
metadata: {name: weekly, namespace: shop}
spec:
  schedule: "0 4 * * 0"
  job: {pod: {containers: [{name: c, image: "report:1"}]}}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: data, namespace: shop}
spec: {driver: zfs, size: 10Gi, node: w1}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: share, namespace: shop}
spec: {driver: nfs, nfs: {server: nas.example.org, path: /export/share}}
---
apiVersion: legion/v1
kind: Route
metadata: {name: site, namespace: shop}
spec: {host: shop.example.org, path: /, service: web, tls: {secret: site-tls}}
---
apiVersion: legion/v1
kind: Secret
metadata: {name: db-password, namespace: shop, labels: {app: db}}
spec: {text: hunter22}
---
apiVersion: legion/v1
kind: Config
metadata: {name: settings, namespace: shop}
spec: {text: "color: blue"}
---
apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {isolation: namespace, quota: {tasks: 20, memory: 4Gi}, security: {allow: [rawSockets]}}
---
apiVersion: legion/v1
kind: RoleBinding
metadata: {name: alice, namespace: shop}
spec: {user: alice, role: edit}
---
apiVersion: legion/v1
kind: NetworkPolicy
metadata: {name: db-in, namespace: shop}
spec:
  services: {app: db}
  ingress: [{from: [{services: {app: web}}], ports: [{port: 5432}]}]
---
apiVersion: legion/v1
kind: ImagePolicy
metadata: {name: signed}
spec: {repositories: ["registry.example.org/**"], keys: ["-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----"], mode: enforce}
`)
	byKind := map[legion.Kind][]legion.Object{}
	for _, o := range objs {
		byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
	}
	web := byKind[legion.KindService][0].(*legion.Service)
	web.Metadata.Generation = 2
	web.Status.Running, web.Status.Ready, web.Status.VIP = 3, 1, "10.201.0.4"
	web.Status.Update = &legion.UpdateStatus{State: legion.UpdatePaused, Message: "task web-2-b failed: exit 1"}
	byKind[legion.KindService][1].(*legion.Service).Status.Ready = 2

	m1 := byKind[legion.KindNode][0].(*legion.Node)
	m1.Status = legion.NodeStatus{State: legion.NodeReady, Hostname: "box1", Addr: "192.0.2.1", Version: "0.9.0",
		Platform: legion.Platform{OS: "freebsd", Arch: "amd64"}}
	w1 := byKind[legion.KindNode][1].(*legion.Node)
	w1.Status = legion.NodeStatus{State: legion.NodeReady, Hostname: "box2", Addr: "192.0.2.2", Version: "0.9.0",
		Platform: legion.Platform{OS: "freebsd", Arch: "arm64"},
		Drain:    &legion.DrainStatus{State: legion.DrainState("draining")}}

	t1 := byKind[legion.KindTask][0].(*legion.Task)
	t1.Status = legion.TaskStatus{State: legion.TaskRunning, Timestamp: *ago(5 * time.Minute), IP: "10.200.0.7", Restarts: 1, PodJail: "legion-7",
		Containers: []legion.ContainerStatus{{Name: "c", State: "running", Ready: true}, {Name: "log", State: "running"}}}
	t2 := byKind[legion.KindTask][1].(*legion.Task)
	t2.Status = legion.TaskStatus{State: legion.TaskPending, Timestamp: *ago(30 * time.Second), Message: "no node fits: 2 drained"}

	j := byKind[legion.KindJob][0].(*legion.Job)
	j.Status = legion.JobStatus{State: legion.JobRunning, Started: ago(3 * time.Hour), Active: 1, Succeeded: 1, Failed: 1}
	byKind[legion.KindCronJob][0].(*legion.CronJob).Status.LastSchedule = ago(9 * time.Hour)
	byKind[legion.KindCronJob][1].(*legion.CronJob).Status.CountedFrom = ago(2 * time.Hour) // no run yet
	byKind[legion.KindVolume][0].(*legion.Volume).Status.Node = "w1"
	ns := byKind[legion.KindNamespace][0].(*legion.Namespace)
	ns.Status.Used = &legion.QuotaUsage{Tasks: 3}
	return byKind
}

func render(t *testing.T, l listing, output string) (string, string) {
	t.Helper()
	f, err := parseOutput(output)
	if err != nil {
		t.Fatal(err)
	}
	var out, errw bytes.Buffer
	if err := l.print(&out, &errw, f); err != nil {
		t.Fatalf("-o %s: %v", output, err)
	}
	return out.String(), errw.String()
}

// Every kind has a table of its own, and -o wide adds columns; the
// goldens show them (go test -run TestKindTables -update rewrites them).
func TestKindTables(t *testing.T) {
	t.Parallel()
	byKind := fixtures(t)
	for _, kind := range legion.Kinds() {
		objs := byKind[kind]
		if len(objs) == 0 {
			t.Fatalf("no fixture of kind %s", kind)
		}
		if _, ok := kindTables[kind]; !ok {
			t.Errorf("%s has no table of its own", kind)
		}
		table, _ := render(t, objectListing(objs, false, false, fixtureNow), "table")
		wide, _ := render(t, objectListing(objs, kind.Namespaced(), false, fixtureNow), "wide")
		goldenOutput(t, "get_"+strings.ToLower(string(kind)), "$ legion get "+plural(strings.ToLower(string(kind)))+"\n"+table+
			"$ legion get "+plural(strings.ToLower(string(kind)))+" -o wide"+map[bool]string{true: " -A", false: ""}[kind.Namespaced()]+"\n"+wide)
	}
}

// An empty table says so on standard error and prints nothing, so scripts
// reading standard output see no header.
func TestEmptyListing(t *testing.T) {
	t.Parallel()
	l := objectListing(nil, false, false, fixtureNow)
	l.none = "services"
	out, errOut := render(t, l, "table")
	if out != "" || errOut != "No services found.\n" {
		t.Errorf("empty table: stdout %q, stderr %q", out, errOut)
	}
	if out, _ := render(t, l, "json"); out != "[]\n" {
		t.Errorf("empty -o json: %q, want []", out)
	}
}

// The node ls and tasks tables: node ls adds each manager's status and
// the running tasks; tasks filters by owner and sorts.
func TestNodeAndTaskListings(t *testing.T) {
	t.Parallel()
	byKind := fixtures(t)
	members := []client.Member{{ID: "m1", Address: "192.0.2.1:7470", Voter: true, Leader: true, Reachability: "Leader"}}
	nodes := nodeListing(byKind[legion.KindNode], byKind[legion.KindTask], members, fixtureNow)
	table, _ := render(t, nodes, "table")
	wide, _ := render(t, nodes, "wide")
	tasks := objectListing(ownedTasks(byKind[legion.KindTask], "web"), true, false, fixtureNow)
	tt, _ := render(t, tasks, "table")
	tw, _ := render(t, tasks, "wide")
	goldenOutput(t, "node_ls_tasks", "$ legion node ls\n"+table+"$ legion node ls -o wide\n"+wide+
		"$ legion tasks web -A\n"+tt+"$ legion tasks web -A -o wide\n"+tw)
	if got := ownedTasks(byKind[legion.KindTask], "other"); len(got) != 0 {
		t.Errorf("tasks of another owner: %d", len(got))
	}
}

// -o name, json, yaml, go-template, jsonpath and custom-columns on get's
// and tasks' listings see the same fields -o json prints.
func TestOutputFormats(t *testing.T) {
	t.Parallel()
	byKind := fixtures(t)
	svcs := objectListing(byKind[legion.KindService], false, false, fixtureNow)
	tasks := objectListing(ownedTasks(byKind[legion.KindTask], ""), false, false, fixtureNow)
	one := objectListing(byKind[legion.KindService][:1], false, true, fixtureNow)
	dir := t.TempDir()
	tmplFile := filepath.Join(dir, "t.tmpl")
	pathFile := filepath.Join(dir, "p.jsonpath")
	if err := os.WriteFile(tmplFile, []byte("{{range .}}{{.metadata.name}} {{.status.state}}\n{{end}}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pathFile, []byte("{.spec.replicas}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, output string
		l            listing
		want         string
	}{
		{"get name", "name", svcs, "service/web\nservice/agent\n"},
		{"tasks name", "name", tasks, "task/web-1-a\ntask/web-2-b\n"},
		{"get go-template", `go-template={{range .}}{{.metadata.name}}={{.status.ready}}{{"\n"}}{{end}}`, svcs, "web=1\nagent=2\n"},
		{"get one go-template", `go-template={{.metadata.namespace}}/{{.metadata.name}} {{.spec.replicas}}`, one, "shop/web 3"},
		// kubectl's templates read a list's .items.
		{"get go-template of items", `go-template={{range .items}}{{.metadata.name}} {{end}}{{len .items}}`, svcs, "web agent 2"},
		{"get go-template of items in if", `go-template={{if .items}}{{(index .items 0).metadata.name}}{{end}}`, svcs, "web"},
		{"tasks go-template-file", "go-template-file=" + tmplFile, tasks, "web-1-a running\nweb-2-b pending\n"},
		{"get jsonpath", "jsonpath={[*].metadata.name}", svcs, "web agent"},
		{"get jsonpath of kubectl's list", "jsonpath={.items[*].metadata.name}", svcs, "web agent"},
		{"get jsonpath range of kubectl's list", `jsonpath={range .items[*]}{.metadata.name}{"\n"}{end}`, svcs, "web\nagent\n"},
		{"get jsonpath kubectl's list short", "jsonpath=.items[1].metadata.name", svcs, "agent"},
		{"get one jsonpath is not a list", "jsonpath={.items[*].metadata.name}", one, ""},
		{"get jsonpath range", `jsonpath={range [*]}{.metadata.name}{"\t"}{.status.update.state}{"\n"}{end}`, svcs, "web\tpaused\nagent\t\n"},
		{"tasks jsonpath filter", `jsonpath={[?(@.status.state=="pending")].status.message}`, tasks, "no node fits: 2 drained"},
		{"get one jsonpath-file", "jsonpath-file=" + pathFile, one, "3"},
		{"tasks custom-columns", "custom-columns=TASK:.metadata.name,IP:.status.ip", tasks, "TASK     IP\nweb-1-a  10.200.0.7\nweb-2-b  -\n"},
	} {
		got, _ := render(t, tc.l, tc.output)
		if got != tc.want {
			t.Errorf("%s: -o %s printed %q, want %q", tc.name, tc.output, got, tc.want)
		}
	}

	// json: a list is an array, even of one; a named object alone.
	out, _ := render(t, objectListing(byKind[legion.KindService][:1], false, false, fixtureNow), "json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		t.Errorf("-o json of a list of one is not an array of one: %v\n%s", err, out)
	}
	out, _ = render(t, one, "json")
	var obj map[string]any
	if err := json.Unmarshal([]byte(out), &obj); err != nil || obj["kind"] != "Service" {
		t.Errorf("-o json of one named object: %v\n%s", err, out)
	}
	// yaml reads back as manifests.
	out, _ = render(t, svcs, "yaml")
	back := decode(t, out)
	if len(back) != 2 || back[0].(*legion.Service).Status.Update.Message != "task web-2-b failed: exit 1" {
		t.Errorf("-o yaml does not read back:\n%s", out)
	}
}

// A wrong -o is refused before anything is asked, naming the flag and what
// it takes; a template that does not parse, or fails on the data, is an
// error, not empty output.
func TestOutputErrors(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"tabel", "json=x", "go-template=", "go-template={{.x", "jsonpath={.a[}", "custom-columns=NAME", "jsonpath-file=/nonexistent/p"} {
		_, err := parseOutput(bad)
		if err == nil || !strings.Contains(err.Error(), "-o") {
			t.Errorf("-o %s: %v, want an error naming -o", bad, err)
		}
	}
	_, err := parseOutput("tabel")
	for _, want := range []string{"table", "wide", "name", "json", "yaml", "go-template=", "jsonpath=", "custom-columns="} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("unknown -o error %v lacks %q", err, want)
		}
	}
	f, err := parseOutput("go-template={{.metadata.name.first}}")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	l := objectListing(fixtures(t)[legion.KindService][:1], false, true, fixtureNow)
	if err := l.print(&b, &b, f); err == nil {
		t.Errorf("a template failing on the data printed %q", b.String())
	}
}

// watch prints rows that change, with the event, the header once and the
// later rows under the first ones; -o json one event per line, -o name
// the objects.
func TestWatchRows(t *testing.T) {
	t.Parallel()
	byKind := fixtures(t)
	svcs := byKind[legion.KindService]
	web := legion.Clone(svcs[0]).(*legion.Service)
	web.Status.Ready = 3
	web.Status.Update.State = legion.UpdateCompleted
	run := func(output string) string {
		f, err := parseOutput(output)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		p := &watchPrinter{w: &b, f: f, now: func() time.Time { return fixtureNow }}
		for _, step := range []struct {
			typ  string
			objs []legion.Object
		}{{client.Added, svcs}, {client.Modified, []legion.Object{web}}, {client.Deleted, svcs[1:]}} {
			if err := p.print(step.typ, step.objs); err != nil {
				t.Fatal(err)
			}
		}
		return b.String()
	}
	table := run("table")
	goldenOutput(t, "watch_services", "$ legion watch services\n"+table)
	if lines := strings.Split(strings.TrimSpace(table), "\n"); len(lines) != 5 || !strings.HasPrefix(lines[0], "EVENT") ||
		strings.Count(table, "EVENT") != 1 || !strings.Contains(lines[3], "3/3") {
		t.Errorf("watch table:\n%s", table)
	}
	var types []string
	for line := range strings.SplitSeq(strings.TrimSpace(run("json")), "\n") {
		var e struct {
			Type   string         `json:"type"`
			Object map[string]any `json:"object"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("watch -o json line %q: %v", line, err)
		}
		types = append(types, e.Type+" "+e.Object["metadata"].(map[string]any)["name"].(string))
	}
	if want := []string{"ADDED web", "ADDED agent", "MODIFIED web", "DELETED agent"}; !cmp.Equal(types, want) {
		t.Errorf("watch -o json events %v, want %v", types, want)
	}
	if got := run("name"); got != "service/web\nservice/agent\nservice/web\nservice/agent\n" {
		t.Errorf("watch -o name: %q", got)
	}
	if got := run("jsonpath={.metadata.name} {.status.ready}"); got != "web 1\nagent 2\nweb 3\nagent 2\n" {
		t.Errorf("watch -o jsonpath: %q", got)
	}
}

// The listings of status, stack ls and services, audit, image ls and ca
// status take -o like get's: their tables and JSON are in the golden.
func TestOtherListings(t *testing.T) {
	t.Parallel()
	byKind := fixtures(t)
	svcs := byKind[legion.KindService]
	for _, o := range svcs {
		o.GetMetadata().Labels = map[string]string{compose.StackLabel: "shop"}
	}
	st := client.Status{NodeID: "m1", Role: "manager", Initialized: true, State: "Leader", Term: 3, LeaderID: "m1", LeaderAddress: "192.0.2.1:7470",
		AppliedIndex: 40, CommitIndex: 40, Members: []client.Member{{ID: "m1", Address: "192.0.2.1:7470", Voter: true, Leader: true, Reachability: "Leader"}}}
	events := []client.AuditEvent{
		{Time: fixtureNow, Actor: "admin", Role: "admin", From: "192.0.2.9:5000", Action: "apply", Kind: "Service", Namespace: "shop", Name: "web", Outcome: "ok", Manager: "m1"},
		{Time: fixtureNow.Add(time.Second), Actor: "bob", Action: "exec", Kind: "Task", Namespace: "shop", Name: "web-1-a", Outcome: "denied", Message: "bob may not exec\nin shop", Manager: "m1"},
	}
	images := []*image.Record{{Reference: "localhost/hello:1", Digest: "sha256:0123456789abcdef0123", Manifest: "sha256:fedcba9876543210fedc",
		Platform: image.Platform{OS: "freebsd", Arch: "amd64"}, Layers: make([]image.LayerRecord, 2), Local: true, Pulled: fixtureNow, LastUsed: fixtureNow}}
	ca := client.CARotation{Digest: "sha256:new", PreviousDigest: "sha256:old", Pending: []string{"w1", "w2"}}
	var b strings.Builder
	for _, c := range []struct {
		cmd string
		l   listing
	}{
		{"status -o json", statusListing(st)},
		{"stack ls", stackListing(svcs)},
		{"stack ls -o name", stackListing(svcs)},
		{"stack services shop", stackServicesListing("shop", svcs, fixtureNow)},
		{"stack services other", stackServicesListing("other", svcs, fixtureNow)},
		{"audit -o wide", auditListing(events)},
		{"audit -o name", auditListing(events)},
		{"audit -o json", auditListing(events[:1])},
		{"image ls -o wide", imageListing(images)},
		{"image ls -o jsonpath={[*].reference}", imageListing(images)},
		{"ca status -o yaml", caListing(ca)},
	} {
		output := "table"
		if _, o, ok := strings.Cut(c.cmd, " -o "); ok {
			output = o
		}
		out, errOut := render(t, c.l, output)
		b.WriteString("$ legion " + c.cmd + "\n" + out + errOut)
		if !strings.HasSuffix(out+errOut, "\n") {
			b.WriteString("\n")
		}
	}
	goldenOutput(t, "other_listings", b.String())
}

// What a command did reads kind/name verb everywhere, the kind in lower
// case, as kubectl says it.
func TestConfirm(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	confirm(&b, string(legion.KindService), "hello", "created")
	confirm(&b, string(legion.KindNode), "w1", "unchanged:", "a voter already")
	confirm(&b, "image", "localhost/hello:1", "removed", "(2 layers freed)")
	want := "service/hello created\nnode/w1 unchanged: a voter already\nimage/localhost/hello:1 removed (2 layers freed)\n"
	if b.String() != want {
		t.Errorf("confirm printed %q, want %q", b.String(), want)
	}
	svc := decode(t, "apiVersion: legion/v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec: {pod: {containers: [{name: c, image: x}]}}\n")[0]
	if got := ref(svc); got != "service/web -n shop" {
		t.Errorf("ref: %q", got)
	}
}

// Only an expression that reads .items at its root takes a list as
// kubectl's List.
func TestReadsItems(t *testing.T) {
	t.Parallel()
	for expr, want := range map[string]bool{
		"{.items[*].metadata.name}":                         true,
		".items[0].metadata.name":                           true,
		`{range .items[*]}{.metadata.name}{"\n"}{end}`:      true,
		`{"names: "}{.items[*].metadata.name}`:              true,
		"{[*].metadata.name}":                               false,
		"{.spec.items}":                                     false,
		`{range [*]}{.items}{end}`:                          false,
		`{range [*]}{range .x[*]}{end}{.items}{end}`:        false,
		`{range [*]}{.metadata.name}{end}{.items[0].kind}`:  true,
		"{.items[?(@.status.state==\"running\")].metadata}": true,
	} {
		if got := readsItems(expr); got != want {
			t.Errorf("readsItems(%s) = %v, want %v", expr, got, want)
		}
	}
}
