package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/topui"
)

// scale --wait follows the rollout to every task ready (exit 0); an
// update whose new tasks fail pauses, and apply --wait and rollout status
// say so and exit 1; rollback --wait follows the way back.
func TestRolloutStatusAndWait(t *testing.T) {
	t.Parallel()
	update := "  update: {failureAction: pause, monitor: 5s}\n"
	n, _ := helloCluster(t, helloApp("web", readyHTTP)+update)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	legion := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }
	out, err := legion("scale", "web", "2", "--wait", "--timeout", "90s")
	if err != nil || !strings.Contains(out, "2 of 2 tasks updated, 2 ready") {
		t.Fatalf("scale --wait: %v\n%s", err, out)
	}
	broken := strings.Replace(helloApp("web", readyHTTP), `args: [-listen, "$(LEGION_POD_IP):8080"]`, `args: [-exit, "3"]`, 1)
	broken = strings.Replace(broken, "spec:\n", "spec:\n  replicas: 2\n", 1) + update
	out, err = runLegion(t, broken, append([]string{"apply", "-f", "-", "--wait", "--timeout", "90s"}, flags...)...)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != rolloutFailed || !strings.Contains(out, "paused") {
		t.Fatalf("apply --wait of a failing update: %v, want exit %d saying paused\n%s", err, rolloutFailed, out)
	}
	out, err = legion("rollout", "status", "web", "--timeout", "90s")
	if !errors.As(err, &ee) || ee.code != rolloutFailed || !strings.Contains(out, "paused") {
		t.Fatalf("rollout status of a paused update: %v, want exit %d saying paused\n%s", err, rolloutFailed, out)
	}
	// kubectl's --watch=false: one line, and exit 1 for a failed rollout.
	out, err = legion("rollout", "status", "web", "--watch=false")
	if !errors.As(err, &ee) || ee.code != rolloutFailed || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "service default/web: paused: ") {
		t.Fatalf("rollout status --watch=false of a paused update: %v, want exit %d and one line\n%s", err, rolloutFailed, out)
	}
	if out, err := legion("rollback", "web", "--wait", "--timeout", "90s"); err != nil || !strings.Contains(out, "2 of 2 tasks updated, 2 ready") {
		t.Fatalf("rollback --wait: %v\n%s", err, out)
	}
	// rollout history: the rollback's spec came from the broken one,
	// which a diff shows.
	if out, err := legion("rollout", "history", "web"); err != nil || !strings.Contains(out, "Last update: rolled-back, started ") ||
		!strings.Contains(out, "--- before the update\n+++ now\n") || !strings.Contains(out, "-exit") {
		t.Errorf("rollout history after a rollback: %v\n%s", err, out)
	}
	// A rollback asked for, done, is no failure: rollout status says so
	// as it would of a completed update (it exited 1, as for a failed
	// update rolled back by its failure action).
	if out, err := legion("rollout", "status", "web", "--timeout", "90s"); err != nil || !strings.Contains(out, "rolled-back: 2 of 2 tasks updated, 2 ready") {
		t.Fatalf("rollout status after a rollback asked for: %v\n%s", err, out)
	}
	// A scale after the rollback leaves the update rolled-back: that is
	// no failure of the scale.
	if out, err := legion("scale", "web", "1", "--wait", "--timeout", "90s"); err != nil || !strings.Contains(out, "1 of 1 tasks updated, 1 ready") {
		t.Fatalf("scale --wait after a rollback: %v\n%s", err, out)
	}
	if out, err := legion("rollout", "status", "web", "-w=false"); err != nil || out != "service default/web: rolled-back: 1 of 1 tasks updated, 1 ready\n" {
		t.Fatalf("rollout status -w=false: %v\n%s", err, out)
	}
	// A rollout that cannot finish: the timeout says where it stood when
	// last read, not what a read cut short by the timeout left.
	ghost := strings.NewReplacer("name: web", "name: ghost", "localhost/hello:1", "localhost/nothere:1").Replace(helloApp("web", readyHTTP))
	out, err = runLegion(t, ghost, append([]string{"apply", "-f", "-", "--wait", "--timeout", "3s"}, flags...)...)
	if !errors.As(err, &ee) || ee.code != rolloutTimedOut || !strings.Contains(ee.msg, "not rolled out within 3s: 0 of 1 tasks updated, 0 ready") {
		t.Fatalf("apply --wait of a service whose image is missing: %v, want exit %d saying 0 of 1 tasks updated\n%s", err, rolloutTimedOut, out)
	}
	// One no node can run says why its tasks wait.
	huge := strings.NewReplacer("name: web", "name: huge", "      - name: app\n", "      - name: app\n        resources: {requests: {memory: 900Gi}}\n").Replace(helloApp("web", readyHTTP))
	out, err = runLegion(t, huge, append([]string{"apply", "-f", "-", "--wait", "--timeout", "3s"}, flags...)...)
	if !errors.As(err, &ee) || ee.code != rolloutTimedOut || !strings.Contains(ee.msg, "0 ready; 1 pending: no node can run it: 1 node has too little memory") {
		t.Fatalf("apply --wait of a service no node can run: %v, want exit %d saying why its task is pending\n%s", err, rolloutTimedOut, out)
	}
	// A service that is not there is said so at once, not waited for as
	// through an election until the timeout.
	if _, err := legion("rollout", "status", "nothere", "--timeout", "60s"); err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), "Service default/nothere: not found") {
		t.Fatalf("rollout status of no service: %v, want not found", err)
	}
	if _, err := legion("scale", "web", "3", "--timeout", "5s"); err == nil {
		t.Error("scale --timeout without --wait accepted")
	}
}

// rollout restart replaces a service's tasks in a rolling update; the
// manifest applied again keeps the restart (no second one); rollback has
// nothing to go back to after a restart alone; describe shows it.
func TestRolloutRestart(t *testing.T) {
	t.Parallel()
	manifest := helloApp("web", readyHTTP)
	n, ctx := helloCluster(t, manifest)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }
	before := waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready })
	out, err := run("rollout", "restart", "web", "--wait", "--timeout", "90s")
	if err != nil || !strings.Contains(out, "service/web restarting: its tasks are replaced in a rolling update") ||
		!strings.Contains(out, "1 of 1 tasks updated, 1 ready") {
		t.Fatalf("rollout restart --wait: %v\n%s", err, out)
	}
	after := waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool {
		return tk.Status.Ready && tk.Spec.DesiredState == legion.TaskRunning
	})
	if after.Metadata.Name == before.Metadata.Name {
		t.Fatalf("task %s still runs after the restart", before.Metadata.Name)
	}
	if out, err := runLegion(t, manifest, append([]string{"apply", "-f", "-"}, flags...)...); err != nil || !strings.Contains(out, "service/web unchanged") {
		t.Fatalf("the manifest applied again: %v, want unchanged (the restart kept)\n%s", err, out)
	}
	if out, err := run("rollback", "web"); err == nil || !strings.Contains(err.Error(), "only restarted its tasks (legion rollout restart): there is nothing to go back to") {
		t.Fatalf("rollback after a restart: %v, want refused\n%s", err, out)
	}
	if out, err := run("describe", "service", "web"); err != nil || !strings.Contains(out, "(legion rollout restart)") {
		t.Fatalf("describe service: %v, want the restart shown\n%s", err, out)
	}
	if _, err := run("rollout", "restart", "web", "--timeout", "5s"); err == nil {
		t.Error("rollout restart --timeout without --wait accepted")
	}
	// legion top's R does the same.
	said, err := topBackend{cl: n.Client}.Do(ctx, topui.Action{Verb: "restart", Kind: legion.KindService, Namespace: "default", Name: "web"})
	if err != nil || said != "service/web restarting" {
		t.Fatalf("top's restart: %q, %v", said, err)
	}
	waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool {
		return tk.Status.Ready && tk.Spec.DesiredState == legion.TaskRunning && tk.Metadata.Name != after.Metadata.Name
	})
}

// onlyRestarted tells an update that only restarted from one that
// changed more, or nothing.
func TestOnlyRestarted(t *testing.T) {
	t.Parallel()
	at := func(s string) *time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return &v
	}
	spec := func(image string, restarted *time.Time) legion.ServiceSpec {
		var s legion.ServiceSpec
		s.Pod.Containers = []legion.Container{{Name: "c", Image: image}}
		s.Pod.RestartedAt = restarted
		return s
	}
	first, second := at("2026-12-05T07:00:00Z"), at("2026-12-05T08:00:00Z")
	for _, tc := range []struct {
		name      string
		prev, now legion.ServiceSpec
		want      bool
	}{
		{"a first restart", spec("a:1", nil), spec("a:1", first), true},
		{"a second restart", spec("a:1", first), spec("a:1", second), true},
		{"a new image", spec("a:1", first), spec("a:2", first), false},
		{"a restart and a new image", spec("a:1", nil), spec("a:2", first), false},
		{"no restart", spec("a:1", nil), spec("a:2", nil), false},
		{"the same", spec("a:1", first), spec("a:1", first), false},
	} {
		if got := onlyRestarted(tc.prev, tc.now); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// apply --wait follows a Job to its end, as kubectl wait
// --for=condition=complete would: exit 0 once it completed, 1 once it
// failed, saying why; a CronJob is said not to be waited for.
func TestApplyWaitFollowsAJob(t *testing.T) {
	t.Parallel()
	n := startCluster(t)
	ctx := context.Background()
	deployHello(ctx, t, n, helloApp("web", readyHTTP))
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	job := func(name, args string) string {
		return `apiVersion: legion/v1
kind: Job
metadata: {name: ` + name + `}
spec:
  completions: 2
  backoffLimit: 0
  pod: {containers: [{name: c, image: localhost/hello:1, pullPolicy: never, args: ` + args + `}]}
`
	}
	out, err := runLegion(t, job("fine", `[-say, done, -exit, "0"]`), append([]string{"apply", "-f", "-", "--wait", "--timeout", "90s"}, flags...)...)
	if err != nil || !strings.Contains(out, "job default/fine: complete: 2 of 2 completions, 0 active, 0 failed") {
		t.Fatalf("apply --wait of a job that completes: %v\n%s", err, out)
	}
	out, err = runLegion(t, job("broken", `[-exit, "3"]`), append([]string{"apply", "-f", "-", "--wait", "--timeout", "90s"}, flags...)...)
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != rolloutFailed || !strings.Contains(ee.msg, "job default/broken failed: 1 task failed, more than its backoffLimit of 0") {
		t.Fatalf("apply --wait of a job that fails: %v, want exit %d saying why\n%s", err, rolloutFailed, out)
	}
	cron := `apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly}
spec: {schedule: "0 3 * * *", job: {pod: {containers: [{name: c, image: localhost/hello:1, pullPolicy: never}]}}}
`
	out, err = runLegion(t, cron, append([]string{"apply", "-f", "-", "--wait", "--timeout", "5s"}, flags...)...)
	if err != nil || !strings.Contains(out, "warning: --wait: cronjob/nightly makes its Jobs on its schedule, and is not waited for") {
		t.Fatalf("apply --wait of a cron job: %v\n%s", err, out)
	}
}

// A rollout short of tasks says what the planner says on the service: an
// image held by a policy makes no task to say it.
func TestRolloutSaysWhatHoldsTheService(t *testing.T) {
	t.Parallel()
	const held = "no task started until its images resolve: cannot resolve localhost/app:2: held by image policy local"
	s := &legion.Service{}
	s.Status.Message = held
	r := rollout{state: string(legion.UpdateUpdating), want: 2, svc: s}
	if got := r.String(); got != "updating: 0 of 2 tasks updated, 0 ready; "+held {
		t.Errorf("rollout: %q, want it to say what holds it", got)
	}
	r.current, r.ready = 2, 2
	if got := r.String(); strings.Contains(got, held) {
		t.Errorf("a rollout with all its tasks: %q, want no word of the service's message", got)
	}
	// A slot that keeps failing to start: the planner's message names the
	// failure, which the last failure repeats, so it is said once.
	const pull = "pulling localhost/app:2: image localhost/app:2: image not present"
	s.Status.Message = "slot 1 failed to start 3 times in a row, on node n1: " + pull
	r = rollout{state: string(legion.UpdatePaused), want: 2, svc: s, failing: pull}
	if got := r.String(); got != "paused: 0 of 2 tasks updated, 0 ready; "+s.Status.Message {
		t.Errorf("a rollout whose slot keeps failing: %q, want the failure said once", got)
	}
	r.svc = &legion.Service{}
	if got := r.String(); got != "paused: 0 of 2 tasks updated, 0 ready; last failure: "+pull {
		t.Errorf("a rollout with a failure the service does not name: %q", got)
	}
}

// A followed rollout says where it stands in words that hold: the last
// update's "completed" only once everything is there again, and a scale
// down's extra tasks as tasks to stop, not "2 of 1 updated".
func TestRolloutLine(t *testing.T) {
	t.Parallel()
	completed := string(legion.UpdateCompleted)
	for _, tc := range []struct {
		r    rollout
		want string
	}{
		{rollout{state: completed, want: 3, current: 3, ready: 2, settled: true}, "3 of 3 tasks updated, 2 ready"},
		{rollout{state: completed, want: 3, current: 3, ready: 3, settled: true}, "completed: 3 of 3 tasks updated, 3 ready"},
		{rollout{state: completed, want: 1, current: 2, ready: 2, settled: true}, "1 of 1 tasks updated and 1 more to stop, 2 ready"},
		{rollout{state: string(legion.UpdateUpdating), want: 2, current: 1, ready: 1, settled: true}, "updating: 1 of 2 tasks updated, 1 ready"},
		{rollout{want: 2, current: 2, ready: 2, settled: true}, "2 of 2 tasks updated, 2 ready"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}
