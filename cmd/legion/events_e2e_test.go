package main

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
)

// eventsApp is a Service of one hello container with args, rolled back
// when an update's task fails within 10 s; more is appended to the
// container's lines.
func eventsApp(name, args, more string) string {
	return `apiVersion: legion/v1
kind: Service
metadata: {name: ` + name + `}
spec:
  update: {order: stop-first, monitor: 10s, failureAction: rollback}
  pod:
    containers:
      - name: app
        image: localhost/hello:1
        pullPolicy: never
        args: ` + args + `
` + more
}

// followed reads legion events -f -o json's lines as they came.
func followed(t *testing.T, out string) []eventView {
	t.Helper()
	var evs []eventView
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var e eventView
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("legion events -f -o json printed %q: %v", line, err)
		}
		evs = append(evs, e)
	}
	return evs
}

// reasonsOf is the reasons of the events of the objects keep takes, in
// the order they came.
func reasonsOf(evs []eventView, keep func(eventView) bool) []string {
	var out []string
	for _, e := range evs {
		if keep(e) {
			out = append(out, e.Reason)
		}
	}
	return out
}

// inOrder reports whether want appears in got in this order, other
// reasons between allowed.
func inOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

// On a real one-node daemon, legion events -f shows while they happen a
// service whose container keeps crashing (its task started, then backed
// off again and again) and a failed update rolled back (started, rolling
// back, rolled back); legion describe then shows the rollback in the
// service's status and events, with its task.
func TestEventsFollowACrashLoopAndARolledBackUpdate(t *testing.T) {
	t.Parallel()
	listen := `[-listen, "$(LEGION_POD_IP):8080"]`
	n, ctx := helloCluster(t, eventsApp("web", listen, readyHTTP))
	waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready })
	flags := []string{"--server", n.API, "--credentials", n.Admin}

	fctx, stop := context.WithCancel(ctx)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- rootWith(out, errOut, append([]string{"events", "-f", "-o", "json"}, flags...)...).ExecuteContext(fctx)
	}()
	t.Cleanup(func() { stop(); <-done })
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("legion events -f printed:\n%s", out.String())
		}
	})
	// What happened before it started comes first: web's task started.
	waitFor(t, "legion events -f to list web's start", func() bool {
		return strings.Contains(out.String(), `"reason":"TaskStarted"`)
	})
	objs, err := legion.ParseManifest("t.yaml", []byte(eventsApp("crash", `[-exit, "1"]`, "")+"---\n"+
		eventsApp("web", `[-listen, "$(LEGION_POD_IP):8080", -exit, "1"]`, readyHTTP)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.Apply(ctx, objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	crashTask := func(e eventView) bool { return e.Kind == "Task" && strings.HasPrefix(e.Name, "crash-") }
	webService := func(e eventView) bool { return e.Kind == "Service" && e.Name == "web" }
	crashWant := []string{legion.ReasonScheduled, legion.ReasonTaskStarted, legion.ReasonBackOff, legion.ReasonBackOff}
	webWant := []string{legion.ReasonUpdateStarted, legion.ReasonUpdateRollingBack, legion.ReasonUpdateRolledBack}
	waitFor(t, "the crash loop and the rollback in legion events -f", func() bool {
		evs := followed(t, out.String())
		return inOrder(reasonsOf(evs, crashTask), crashWant) && inOrder(reasonsOf(evs, webService), webWant)
	})
	evs := followed(t, out.String())
	for _, e := range evs {
		if crashTask(e) && e.Reason == legion.ReasonBackOff && (e.Type != string(legion.EventWarning) || !strings.Contains(e.Message, "restarting in")) {
			t.Errorf("backoff event %+v: want a warning saying when it restarts", e)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("legion events -f: %v (stderr %q)", err, errOut.String())
	}
	done <- nil // for the cleanup

	desc, err := runLegion(t, "", append([]string{"describe", "service", "web"}, flags...)...)
	if err != nil {
		t.Fatalf("legion describe service web: %v\n%s", err, desc)
	}
	status, events, ok := strings.Cut(desc, "\nEvents:\n")
	if !ok || !strings.Contains(status, "rolled-back") || !strings.Contains(status, "\nTasks:\n  NAME") {
		t.Fatalf("describe service web shows no rolled-back update with its tasks:\n%s", desc)
	}
	var got []string
	for _, line := range strings.Split(events, "\n") {
		for _, r := range webWant {
			if strings.Contains(line, " "+r+" ") {
				got = append(got, r)
			}
		}
	}
	if !inOrder(got, webWant) {
		t.Errorf("describe service web's events %v, want %v in order:\n%s", got, webWant, desc)
	}
	// kubectl events' --for and --types (a list) are --object and --type,
	// and --sort-by=.lastTimestamp the order they come in.
	for _, types := range []string{"Warning", "Warning,Normal"} {
		kubectl, err := runLegion(t, "", append([]string{"events", "--for", "service/web", "--types", types, "--sort-by=.lastTimestamp", "-o", "json"}, flags...)...)
		legionArgs := []string{"events", "--object", "service/web", "-o", "json"}
		if types == "Warning" {
			legionArgs = append(legionArgs, "--type", "warning")
		}
		own, err2 := runLegion(t, "", append(legionArgs, flags...)...)
		if err != nil || err2 != nil || kubectl != own || !strings.Contains(own, `"type": "Warning"`) {
			t.Errorf("events --for service/web --types %s: %v, %v\n%s\nwant as %v:\n%s", types, err, err2, kubectl, legionArgs, own)
		}
	}

	// A service of the same name made after crash was deleted is
	// described with its own events, not the crash loop of the one
	// before it (whose tasks may have had the same names).
	if _, err := n.Client.Delete(ctx, legion.KindService, legion.DefaultNamespace, "crash", nil); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "crash's tasks to go", func() bool {
		tasks, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		return err == nil && !slices.ContainsFunc(tasks, func(o legion.Object) bool {
			return o.(*legion.Task).Spec.Owner.Name == "crash"
		})
	})
	deployHello(ctx, t, n, eventsApp("crash", listen, readyHTTP))
	waitTaskOf(ctx, t, n, "crash", func(tk *legion.Task) bool { return tk.Status.Ready })
	desc, err = runLegion(t, "", append([]string{"describe", "service", "crash"}, flags...)...)
	if err != nil {
		t.Fatalf("legion describe service crash: %v\n%s", err, desc)
	}
	_, events, _ = strings.Cut(desc, "\nEvents:\n")
	if strings.Contains(events, " "+legion.ReasonBackOff+" ") || !strings.Contains(events, " "+legion.ReasonTaskStarted+" ") {
		t.Errorf("describe service crash, made again, shows the crash loop of the one deleted before it, or not its own start:\n%s", desc)
	}
}

// Deleting a running task stops it first, as kubectl delete pod does: the
// slot's next task starts only once it has stopped, so a stateful
// ordinal never has two pods on its Volume (it had, for the time the old
// pod took to stop). The stopped task stays in the slot's history until
// it is deleted again.
func TestDeletingARunningTaskStopsItFirst(t *testing.T) {
	t.Parallel()
	db := strings.Replace(helloApp("db", readyHTTP+"        volumeMounts: [{name: data, path: /data}]\n    volumes: [{name: data, claim: {size: 1Gi}}]\n"),
		"spec:\n", "spec:\n  mode: stateful\n", 1)
	n, ctx := helloCluster(t, db)
	old := waitTaskOf(ctx, t, n, "db", func(tk *legion.Task) bool { return tk.Status.Ready })
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	out, err := runLegion(t, "", append([]string{"delete", "task", old.Metadata.Name}, flags...)...)
	if err != nil || !strings.Contains(out, "task/"+old.Metadata.Name+" stopping: its slot's next task starts once it has stopped") {
		t.Fatalf("delete task %s: %v\n%s", old.Metadata.Name, err, out)
	}
	// Each listing is one version of the store: the first to hold the
	// next task must hold the old one stopped.
	var next *legion.Task
	var oldSays string // the deleted task's message once stopped
	waitFor(t, "the ordinal's next task", func() bool {
		tasks, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		var stopped bool
		for _, o := range tasks {
			tk := o.(*legion.Task)
			switch {
			case tk.Metadata.UID == old.Metadata.UID:
				stopped = tk.Status.State.Terminal()
				oldSays = tk.Message()
			case tk.Spec.Owner.Name == "db":
				next = tk
			}
		}
		if next != nil && !stopped {
			t.Fatalf("%s started while %s, deleted, had not stopped", next.Metadata.Name, old.Metadata.Name)
		}
		return next != nil
	})
	if oldSays != "stopped (deleted)" {
		t.Errorf("the deleted task, stopped, says %q: want that it was deleted", oldSays)
	}
	waitTaskOf(ctx, t, n, "db", func(tk *legion.Task) bool { return tk.Metadata.UID == next.Metadata.UID && tk.Status.Ready })
	// Ended, it is deleted for good.
	if out, err := runLegion(t, "", append([]string{"delete", "task", old.Metadata.Name}, flags...)...); err != nil || !strings.Contains(out, "task/"+old.Metadata.Name+" deleted") {
		t.Fatalf("delete task %s again: %v\n%s", old.Metadata.Name, err, out)
	}
	if _, err := n.Client.Get(ctx, legion.KindTask, legion.DefaultNamespace, old.Metadata.Name); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("the stopped task deleted again: %v, want not found", err)
	}
}
