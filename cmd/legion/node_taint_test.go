package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// node taint adds and removes a node's taints in kubectl taint's words;
// a NoExecute taint stops the tasks that do not tolerate it, which say
// so, and they come back once it goes. Bad input is refused naming what
// was expected, with nothing written.
func TestNodeTaint(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("web", ""))
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }
	taints := func() []string {
		t.Helper()
		o, err := n.Client.Get(context.Background(), legion.KindNode, "", n.Name)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tt := range o.(*legion.Node).Spec.Taints {
			out = append(out, tt.String())
		}
		return out
	}
	first := waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready })

	if out, err := run("node", "taint", n.Name, "dedicated=shop:NoSchedule", "spot:PreferNoSchedule"); err != nil ||
		out != "node/"+n.Name+" updated: taints dedicated=shop:NoSchedule, spot:PreferNoSchedule\n" {
		t.Fatalf("node taint: %v\n%s", err, out)
	}
	if _, err := run("node", "taint", n.Name, "dedicated=web:NoSchedule"); err == nil ||
		!strings.Contains(err.Error(), "has the taint dedicated=shop:NoSchedule already: --overwrite changes it to dedicated=web:NoSchedule") {
		t.Fatalf("a taint's new value without --overwrite: %v", err)
	}
	if out, err := run("node", "taint", "node/"+n.Name, "dedicated=web:NoSchedule", "spot-", "--overwrite"); err != nil || !slices.Equal(taints(), []string{"dedicated=web:NoSchedule"}) {
		t.Fatalf("node taint --overwrite and a removal: %v %v\n%s", err, taints(), out)
	}
	// NoSchedule leaves the running task; NoExecute stops it, saying why.
	if tk := waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready }); tk.Metadata.UID != first.Metadata.UID {
		t.Fatalf("a NoSchedule taint moved task %s: %s runs now", first.Metadata.Name, tk.Metadata.Name)
	}
	var maintOut, maintErr syncBuffer
	if err := rootWith(&maintOut, &maintErr, append([]string{"node", "taint", n.Name, "maint:NoExecute"}, flags...)...).ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	if want := "warning: maint:NoExecute stops the tasks on node " + n.Name + " that do not tolerate it: default/" + first.Metadata.Name + " ("; !strings.HasPrefix(maintErr.String(), want) {
		t.Errorf("node taint NoExecute: stderr %q, want it to name the task it stops: %q", maintErr.String(), want)
	}
	evicted := waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool {
		return tk.Metadata.UID == first.Metadata.UID && tk.Status.State.Terminal()
	})
	if got, want := evicted.Message(), "stopped (evicted by taint maint:NoExecute)"; got != want {
		t.Errorf("the evicted task says %q, want %q", got, want)
	}
	if out, err := run("tasks", "web"); err != nil || !strings.Contains(out, "stopped (evicted by taint maint:NoExecute)") {
		t.Errorf("legion tasks web: %v\n%s", err, out)
	}
	if out, err := run("node", "taint", n.Name, "maint-", "dedicated:NoSchedule-"); err != nil || out != "node/"+n.Name+" updated: taints none\n" {
		t.Fatalf("removing every taint: %v\n%s", err, out)
	}
	waitTaskOf(ctx, t, n, "web", func(tk *legion.Task) bool { return tk.Status.Ready })

	for _, bad := range []struct {
		args []string
		says string
	}{
		{[]string{"k=v"}, `taint "k=v": no effect: expected KEY[=VALUE]:EFFECT`},
		{[]string{"k=v:Never"}, `effect "Never": expected NoSchedule, PreferNoSchedule or NoExecute`},
		{[]string{"=v:NoSchedule"}, "expected KEY[=VALUE]:EFFECT to add it, or KEY[:EFFECT]- to remove it"},
		{[]string{"k:NoSchedule", "k-"}, "taint k is both added and removed"},
		{[]string{"gone:NoExecute-"}, "has no taint gone:NoExecute"},
		{[]string{"Bad Key=v:NoSchedule"}, "spec.taints[0].key"},
	} {
		if _, err := run(append([]string{"node", "taint", n.Name}, bad.args...)...); err == nil || !strings.Contains(err.Error(), bad.says) {
			t.Errorf("node taint %s: %v, want an error containing %q", strings.Join(bad.args, " "), err, bad.says)
		}
	}
	if got := taints(); len(got) != 0 {
		t.Errorf("a refused change wrote taints: %v", got)
	}
}
