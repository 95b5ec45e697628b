package main

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testimage"
)

// A job's finished task on a real one-node daemon: legion logs prints its
// output, by the job's name and by the task's, once its pod is gone.
func TestLogsOfAFinishedJobOnADaemon(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Job
metadata: {name: greet}
spec:
  pod:
    containers:
      - name: greet
        image: localhost/hello:1
        pullPolicy: never
        args: [-say, "hello from the job", -say, "second line", -err, "a warning", -exit, "0"]
`)
	task := waitTaskOf(ctx, t, n, "greet", func(tk *legion.Task) bool { return tk.Status.State == legion.TaskComplete }).Metadata.Name
	for _, arg := range []string{"greet", "task/" + task} {
		var out, errOut *syncBuffer
		var err error
		// The node's agent opens its sessions stream as the daemon starts;
		// until then the manager says it is not connected.
		waitFor(t, "legion logs to reach the node's agent", func() bool {
			out, errOut = &syncBuffer{}, &syncBuffer{}
			root := rootWith(out, errOut, "logs", arg, "--server", n.API, "--credentials", n.Admin)
			err = root.ExecuteContext(ctx)
			return err == nil || !strings.Contains(err.Error(), "is not connected to this manager")
		})
		if err != nil {
			t.Fatalf("legion logs %s: %v", arg, err)
		}
		if got, want := out.String(), "hello from the job\nsecond line\n"; got != want {
			t.Errorf("legion logs %s: stdout %q, want %q", arg, got, want)
		}
		if got, want := errOut.String(), "a warning\n"; got != want {
			t.Errorf("legion logs %s: stderr %q, want %q", arg, got, want)
		}
	}
}

// kubectl's logs -l on a real node: the tasks of the services whose
// labels match, each line after its task, the last 10 lines of each
// unless --tail says otherwise; with -f, a replica started meanwhile
// joins. A selector that selects nothing says so.
func TestLogsBySelector(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Service
metadata: {name: api, labels: {tier: back}}
spec:
  replicas: 2
  pod:
    containers:
      - name: app
        image: localhost/hello:1
        pullPolicy: never
        args: [-say, "line", -repeat, "12", -listen, "$(LEGION_POD_IP):8080"]
`+readyHTTP)
	names := waitReadyTasks(ctx, t, n, "api", 2)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	// Each task says "line" 12 times, then that it listens.
	count := func(out, name string) int { return strings.Count(out, name+" | ") }
	for args, each := range map[string]int{"-l tier=back": 10, "-l tier!=front --tail -1": 13, "-l tier=back --tail 3": 3} {
		out, errOut := &syncBuffer{}, &syncBuffer{}
		if err := rootWith(out, errOut, append(append([]string{"logs"}, strings.Fields(args)...), flags...)...).ExecuteContext(ctx); err != nil {
			t.Fatalf("logs %s: %v", args, err)
		}
		for _, name := range names {
			if got := count(out.String(), name); got != each {
				t.Errorf("logs %s: %d lines of %s, want %d:\n%s", args, got, name, each, out.String())
			}
		}
	}
	if err := rootWith(&syncBuffer{}, &syncBuffer{}, append([]string{"logs", "-l", "tier=front"}, flags...)...).ExecuteContext(ctx); err == nil ||
		!strings.Contains(err.Error(), "logs -l tier=front: no service, job or task of namespace default has labels that match") {
		t.Errorf("logs -l of nothing: %v", err)
	}

	fctx, stop := context.WithCancel(ctx)
	out := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- rootWith(out, &syncBuffer{}, append([]string{"logs", "-f", "-l", "tier=back"}, flags...)...).ExecuteContext(fctx)
	}()
	waitFor(t, "both replicas followed", func() bool { return count(out.String(), names[0]) == 10 && count(out.String(), names[1]) == 10 })
	if err := rootWith(&syncBuffer{}, &syncBuffer{}, append([]string{"scale", "api", "3"}, flags...)...).ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new replica's lines followed, all of them", func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			name, _, _ := strings.Cut(line, " | ")
			if strings.HasPrefix(name, "api-") && !slices.Contains(names, name) && count(out.String(), name) == 13 {
				return true
			}
		}
		return false
	})
	stop()
	if err := <-done; err != nil {
		t.Errorf("logs -f -l ended by the user: %v", err)
	}
}

// legion logs SERVICE -f follows all three replicas of a service at once,
// each line after its task's name; --tail 2 keeps each task's last two.
// The node runs with --metrics-listen, whose page shows the leader and
// the three pods.
func TestLogsFollowsEveryReplicaOfAService(t *testing.T) {
	t.Parallel()
	metricsAddr := testaddr.Loopback(t)
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 3
  pod:
    containers:
      - name: app
        image: localhost/hello:1
        pullPolicy: never
        args: [-say, "line one", -say, "line two", -listen, "$(LEGION_POD_IP):8080"]
`+readyHTTP, func(o *daemon.Options) { o.MetricsListen = metricsAddr })
	names := waitReadyTasks(ctx, t, n, "web", 3)
	page := func() string {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatalf("scraping legion up's metrics: %v", err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	waitFor(t, "the node's metrics to show the leader and three pods", func() bool {
		p := page()
		return strings.Contains(p, "\nlegion_raft_leader 1\n") && strings.Contains(p, `legion_agent_pods{namespace="default"} 3`+"\n")
	})
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	fctx, stop := context.WithCancel(ctx)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- rootWith(out, errOut, append([]string{"logs", "web", "-f"}, flags...)...).ExecuteContext(fctx)
	}()
	waitFor(t, "a line from every replica", func() bool {
		for _, name := range names {
			if !strings.Contains(out.String(), name+" | line two\n") {
				return false
			}
		}
		return true
	})
	// A replica started while it follows joins, from its first line.
	if err := rootWith(&syncBuffer{}, errOut, append([]string{"scale", "web", "4"}, flags...)...).ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	var added string
	waitFor(t, "the new replica's first line followed", func() bool {
		tasks, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		for _, o := range tasks {
			if tk := o.(*legion.Task); tk.Spec.Owner.Name == "web" && !slices.Contains(names, tk.Metadata.Name) {
				added = tk.Metadata.Name
			}
		}
		return added != "" && strings.Contains(out.String(), added+" | line one\n")
	})
	names = append(names, added)
	stop()
	if err := <-done; err != nil {
		t.Fatalf("legion logs web -f: %v (stderr %q)", err, errOut.String())
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		name, _, ok := strings.Cut(line, " | ")
		if !ok || !slices.Contains(names, name) {
			t.Errorf("line %q does not start with one of the tasks %v", line, names)
		}
	}

	out = &syncBuffer{}
	// Each replica printed "line one", "line two", then "listening on".
	if err := rootWith(out, errOut, append([]string{"logs", "service/web", "--tail", "2", "--timestamps"}, flags...)...).ExecuteContext(ctx); err != nil {
		t.Fatalf("legion logs --tail 2: %v", err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2*len(names) {
		t.Fatalf("--tail 2 printed %q, want two lines of each of %d tasks", out.String(), len(names))
	}
	seen := map[string]int{}
	for _, line := range lines {
		name, rest, _ := strings.Cut(line, " | ")
		stamp, text, _ := strings.Cut(rest, " ")
		if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil || text == "line one" || !slices.Contains(names, name) {
			t.Errorf("--tail 2 --timestamps line %q, want TASK | TIME and one of the last two lines", line)
		}
		if text == "line two" {
			seen[name]++
		}
	}
	if len(seen) != len(names) {
		t.Errorf("--tail 2: \"line two\" from %v, want every task", seen)
	}
}

// Following a job, the tasks it starts after the follow began join, and
// the command ends by itself once the job is over. The first task waits
// for a file the test makes (a host path, so it waits as long as the test
// wants), so the later two start while the follow runs.
func TestLogsFollowsAJobsTasksUntilItIsOver(t *testing.T) {
	t.Parallel()
	gate := t.TempDir()
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Namespace
metadata: {name: batch}
spec: {security: {allow: [hostPath]}}
---
apiVersion: legion/v1
kind: Job
metadata: {name: steps, namespace: batch}
spec:
  completions: 3
  parallelism: 1
  pod:
    restartPolicy: {condition: on-failure, delay: 1s}
    containers:
      - name: app
        image: localhost/hello:1
        pullPolicy: never
        args: [-cat, /gate/open]
        volumeMounts: [{name: gate, path: /gate}]
    volumes: [{name: gate, hostPath: {path: `+strconv.Quote(gate)+`}}]
`)
	var first string
	waitFor(t, "the job's first task started", func() bool {
		tasks, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: "batch"})
		if err != nil {
			return false
		}
		for _, o := range tasks {
			if tk := o.(*legion.Task); tk.Status.Started != nil {
				first = tk.Metadata.Name
				return true
			}
		}
		return false
	})
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- rootWith(out, errOut, "logs", "-f", "job/steps", "-n", "batch", "--server", n.API, "--credentials", n.Admin).ExecuteContext(ctx)
	}()
	// The first task's attempts fail, saying so, until the file is there.
	waitFor(t, "the follow reading the first task", func() bool { return strings.Contains(errOut.String(), first+" | ") })
	if err := os.WriteFile(filepath.Join(gate, "open"), []byte("through\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("legion logs -f job/steps: %v (stderr %q)", err, errOut.String())
		}
	case <-ctx.Done():
		t.Fatalf("legion logs -f job/steps still following after the job's end; printed %q", out.String())
	}
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if name, text, ok := strings.Cut(line, " | "); ok && text == "through" {
			got[name] = true
		}
	}
	if len(got) != 3 || !got[first] {
		t.Fatalf("lines %q: want \"through\" from the first task and the two started after it (stderr %q)", out.String(), errOut.String())
	}
}

// A stateful ordinal's stable name reads that ordinal alone, and a
// follow goes on with its next task when the first is replaced.
func TestLogsFollowAStatefulOrdinalByName(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Service
metadata: {name: st}
spec:
  mode: stateful
  replicas: 2
  pod:
    containers:
      - name: app
        image: localhost/hello:1
        pullPolicy: never
        args: [-say, "up as $(HOSTNAME)", -listen, "$(LEGION_POD_IP):8080"]
`+readyHTTP)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	waitFor(t, "both ordinals ready", func() bool {
		tasks, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		ready := 0
		for _, o := range tasks {
			if tk := o.(*legion.Task); tk.Spec.Owner.Name == "st" && tk.Status.Ready {
				ready++
			}
		}
		return ready == 2
	})
	fctx, stop := context.WithCancel(ctx)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- rootWith(out, errOut, append([]string{"logs", "-f", "st-0"}, flags...)...).ExecuteContext(fctx)
	}()
	waitFor(t, "ordinal 0's first line", func() bool { return strings.Contains(out.String(), "up as st-0\n") })
	if err := rootWith(&syncBuffer{}, errOut, append([]string{"rollout", "restart", "st"}, flags...)...).ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ordinal 0's next task followed", func() bool { return strings.Count(out.String(), "up as st-0\n") == 2 })
	stop()
	if err := <-done; err != nil {
		t.Fatalf("legion logs -f st-0: %v (stderr %q)", err, errOut.String())
	}
	if !strings.Contains(out.String(), "st-0-1 | up as st-0\n") || !strings.Contains(out.String(), "st-0-2 | up as st-0\n") || strings.Contains(out.String(), "st-1") {
		t.Errorf("following st-0 printed %q, want each of its tasks' lines after the task's name, and nothing of ordinal 1", out.String())
	}
}

// kubectl's --all-containers reads every container of a task, init
// containers first, each line after the task and container; --prefix puts
// the task before the lines of one task; -c beside --all-containers is
// refused.
func TestLogsAllContainersAndPrefix(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Job
metadata: {name: pair}
spec:
  pod:
    initContainers:
      - {name: setup, image: localhost/hello:1, pullPolicy: never, args: [-say, "set up", -exit, "0"]}
    containers:
      - {name: a, image: localhost/hello:1, pullPolicy: never, args: [-say, "from a", -exit, "0"]}
      - {name: b, image: localhost/hello:1, pullPolicy: never, args: [-say, "from b", -err, "b warns", -exit, "0"]}
`)
	task := waitTaskOf(ctx, t, n, "pair", func(tk *legion.Task) bool { return tk.Status.State == legion.TaskComplete }).Metadata.Name
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	for _, arg := range []string{"job/pair", task} {
		var out, errOut *syncBuffer
		var err error
		waitFor(t, "legion logs to reach the node's agent", func() bool {
			out, errOut = &syncBuffer{}, &syncBuffer{}
			err = rootWith(out, errOut, append([]string{"logs", arg, "--all-containers"}, flags...)...).ExecuteContext(ctx)
			return err == nil || !strings.Contains(err.Error(), "is not connected to this manager")
		})
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		slices.Sort(lines)
		want := []string{task + " a | from a", task + " b | from b", task + " setup | set up"}
		if err != nil || !slices.Equal(lines, want) || errOut.String() != task+" b | b warns\n" {
			t.Errorf("legion logs %s --all-containers: %v\nstdout %q\nstderr %q\nwant %q", arg, err, out.String(), errOut.String(), want)
		}
	}
	if out, err := runLegion(t, "", append([]string{"logs", "task/" + task, "-c", "a", "--prefix"}, flags...)...); err != nil || out != task+" | from a\n" {
		t.Errorf("legion logs -c a --prefix: %v %q", err, out)
	}
	if _, err := runLegion(t, "", append([]string{"logs", "pair", "-c", "a", "--all-containers"}, flags...)...); err == nil || !strings.Contains(err.Error(), "-c a and --all-containers") {
		t.Errorf("legion logs -c --all-containers: %v", err)
	}
}

// legion logs SERVICE reads the tasks that have output, and says of the
// others (one whose image did not pull) that they have none, on stderr,
// rather than failing for them: an update paused by a failed task keeps
// its old tasks' logs readable. With no task that has output it fails.
func TestLogsOfAServiceSayWhichTasksHaveNothing(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 2
  update: {order: start-first, failureAction: pause}
  pod:
    containers:
      - name: app
        image: localhost/hello:1
        pullPolicy: never
        args: [-say, "up", -listen, "$(LEGION_POD_IP):8080"]
`+readyHTTP+`---
apiVersion: legion/v1
kind: Service
metadata: {name: ghost}
spec:
  replicas: 2
  pod:
    containers:
      - name: app
        image: localhost/nope:1
        pullPolicy: never
`)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	waitFor(t, "two ready tasks of web", func() bool {
		s, err := client.GetAs[*legion.Service](ctx, n.Client, legion.KindService, "default", "web")
		return err == nil && s.Status.Ready == 2
	})
	if err := rootWith(&syncBuffer{}, &syncBuffer{}, append([]string{"set", "image", "web", "app=localhost/nope:1"}, flags...)...).ExecuteContext(ctx); err != nil {
		t.Fatalf("legion set image: %v", err)
	}
	failed := waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool {
		return tk.Status.State == legion.TaskFailed && tk.Status.Started == nil
	}).Metadata.Name
	var out, errOut *syncBuffer
	var err error
	waitFor(t, "legion logs to reach the node's agent", func() bool {
		out, errOut = &syncBuffer{}, &syncBuffer{}
		err = rootWith(out, errOut, append([]string{"logs", "web"}, flags...)...).ExecuteContext(ctx)
		return err == nil || !strings.Contains(err.Error(), "is not connected to this manager")
	})
	if err != nil {
		t.Fatalf("legion logs web: %v (stderr %q)", err, errOut.String())
	}
	if got := strings.Count(out.String(), " | up\n"); got != 2 {
		t.Errorf("legion logs web: %d tasks' lines, want the two old tasks':\n%s", got, out.String())
	}
	if want := "warning: logs web, task " + failed + ": container app of task default/" + failed + " has no output: the task ended before it ran: "; !strings.Contains(errOut.String(), want) {
		t.Errorf("legion logs web: stderr %q, want it to hold %q", errOut.String(), want)
	}

	waitFor(t, "two failed tasks of ghost", func() bool {
		tasks, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		return err == nil && len(slices.DeleteFunc(tasks, func(o legion.Object) bool {
			tk := o.(*legion.Task)
			return tk.Spec.Owner.Name != "ghost" || tk.Status.State != legion.TaskFailed
		})) >= 2
	})
	errOut = &syncBuffer{}
	err = rootWith(&syncBuffer{}, errOut, append([]string{"logs", "ghost"}, flags...)...).ExecuteContext(ctx)
	if err == nil || err.Error() != "logs ghost: none of its tasks has output yet" {
		t.Errorf("legion logs ghost: %v, want that none of its tasks has output (stderr %q)", err, errOut.String())
	}
}

// legion logs -f SERVICE with a task that is placed but not started (its
// image still coming from a registry that holds its blobs back) reads
// the others, says that one has no output yet, and reads it once it
// starts.
func TestLogsFollowATaskOnceItStarts(t *testing.T) {
	t.Parallel()
	// Built before the cluster's two minutes start: on a cold build cache
	// and a busy machine the build alone took them.
	img, err := testimage.Build(context.Background(), testimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	open := make(chan struct{})
	var once sync.Once
	release := func() { once.Do(func() { close(open) }) }
	var reg *httptest.Server
	t.Cleanup(func() {
		release() // first, or Close would wait for the held requests
		if reg != nil {
			reg.Close()
		}
	})
	blobs := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	reg = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
			select {
			case <-open:
			case <-r.Context().Done():
				return
			}
		}
		blobs.ServeHTTP(w, r)
	}))
	n, ctx := helloCluster(t, `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  update: {order: start-first}
  pod:
    containers:
      - name: app
        image: localhost/hello:1
        args: [-listen, "$(LEGION_POD_IP):8080"]
`)
	ref := strings.TrimPrefix(reg.URL, "http://") + "/late/server:1"
	if err := testimage.Push(ctx, img, ref); err != nil {
		t.Fatal(err)
	}
	old := waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready }).Metadata.Name
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	if err := rootWith(&syncBuffer{}, &syncBuffer{}, append([]string{"set", "image", "web", "app=" + ref}, flags...)...).ExecuteContext(ctx); err != nil {
		t.Fatalf("legion set image: %v", err)
	}
	late := waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool {
		return tk.Spec.Node != "" && tk.Metadata.Name != old && tk.Status.Started == nil
	}).Metadata.Name

	fctx, stop := context.WithCancel(ctx)
	defer stop()
	out, errOut := &syncBuffer{}, &syncBuffer{}
	ended := make(chan error, 1)
	go func() {
		ended <- rootWith(out, errOut, append([]string{"logs", "web", "-f"}, flags...)...).ExecuteContext(fctx)
	}()
	waitFor(t, "the old task's line and a word on the new one", func() bool {
		return strings.Contains(out.String(), old+" | listening on ") &&
			strings.Contains(errOut.String(), "warning: logs web, task "+late+": container app of task default/"+late+" has no output yet: the task has not started") &&
			strings.Contains(errOut.String(), "; read if it starts\n")
	})
	release()
	waitFor(t, "the new task's line once it started", func() bool {
		return strings.Contains(out.String(), late+" | listening on ")
	})
	stop()
	if err := <-ended; err != nil {
		t.Errorf("a follow ended by the user: %v, want no error (stderr %q)", err, errOut.String())
	}
}
