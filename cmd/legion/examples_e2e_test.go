package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testpoll"
)

// examplesDir is the repository's examples, from this package.
const examplesDir = "../../examples"

// needsLine marks an example that does not run offline: its leading
// comment says what it needs.
var needsLine = regexp.MustCompile(`(?m)^# Needs: `)

// exampleManifests lists the manifests under examples/ (not testdata),
// split into those that run offline and those that say what they need.
func exampleManifests(t *testing.T) (runnable, needing []string) {
	t.Helper()
	err := filepath.WalkDir(examplesDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(p) != ".yaml" {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if needsLine.Match(data) {
			needing = append(needing, p)
		} else {
			runnable = append(runnable, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return runnable, needing
}

// An example that does not run offline says so at its top: the "Needs:"
// line is in the comment before the first object.
func TestExamplesSayWhatTheyNeed(t *testing.T) {
	t.Parallel()
	runnable, needing := exampleManifests(t)
	if len(runnable) == 0 || len(needing) == 0 {
		t.Fatalf("runnable %v, needing %v", runnable, needing)
	}
	for _, p := range needing {
		data, _ := os.ReadFile(p)
		head, _, _ := strings.Cut(string(data), "apiVersion:")
		if !needsLine.MatchString(head) {
			t.Errorf("%s: its Needs: line is not in its leading comment", p)
		}
	}
}

// applyRunnableExamples applies, in one legion apply -f DIR, every example
// that runs offline, and waits until each Service's tasks are ready and
// each Job has completed; the cluster then holds no Node but its own.
func applyRunnableExamples(t *testing.T, api, admin string) {
	t.Helper()
	runnable, _ := exampleManifests(t)
	dir := t.TempDir()
	for _, p := range runnable {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Flattened, in name order cluster.yaml (a RoleBinding in shop)
		// comes before namespace.yaml: apply must put the Namespace first.
		name := strings.ReplaceAll(strings.TrimPrefix(p, examplesDir+"/"), "/", "-")
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runLegion(t, "", "apply", "-f", dir, "--server", api, "--credentials", admin)
	if err != nil {
		t.Fatalf("apply -f of the runnable examples %v: %v\n%s", runnable, err, out)
	}
	cl, err := client.New(client.Options{Server: api, CredentialsFile: admin})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	var objs []legion.Object
	for _, p := range runnable {
		some, err := readManifests(nil, []string{p}, "")
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, some...)
	}
	for _, o := range objs {
		m := o.GetMetadata()
		if _, err := cl.Get(ctx, o.GetKind(), m.Namespace, m.Name); err != nil {
			t.Errorf("%s %s was not applied: %v", o.GetKind(), legion.DisplayName(o), err)
		}
		switch o := o.(type) {
		case *legion.Service:
			want := 1
			if o.Spec.Replicas != nil {
				want = *o.Spec.Replicas
			}
			testpoll.Until(t, "the tasks of service "+legion.DisplayName(o)+" to be ready", 2*time.Minute, 100*time.Millisecond, func() bool {
				return countTasks(ctx, cl, o.Metadata.Namespace, legion.KindService, o.Metadata.Name, func(t *legion.Task) bool { return t.Status.Ready }) >= want
			})
		case *legion.Job:
			testpoll.Until(t, "job "+legion.DisplayName(o)+" to complete", 2*time.Minute, 100*time.Millisecond, func() bool {
				j, err := cl.Get(ctx, legion.KindJob, o.Metadata.Namespace, o.Metadata.Name)
				return err == nil && j.(*legion.Job).Status.State == legion.JobComplete
			})
		}
	}
	nodes, _, err := cl.List(ctx, legion.KindNode, client.ListOptions{})
	if err != nil || len(nodes) != 1 {
		t.Fatalf("nodes after applying the examples: %d (%v), want only this one", len(nodes), err)
	}
	// The example that changes a node names one this cluster does not
	// have: refused, not made.
	if out, err := runLegion(t, "", "apply", "-f", filepath.Join(examplesDir, "node.yaml"), "--server", api, "--credentials", admin); err == nil || !strings.Contains(err.Error(), "no node node-3") {
		t.Fatalf("apply -f examples/node.yaml: %v\n%s", err, out)
	}
}

func countTasks(ctx context.Context, cl *client.Client, ns string, kind legion.Kind, owner string, ok func(*legion.Task) bool) int {
	tasks, _, err := cl.List(ctx, legion.KindTask, client.ListOptions{Namespace: ns})
	if err != nil {
		return 0
	}
	n := 0
	for _, o := range tasks {
		t := o.(*legion.Task)
		if t.Spec.Owner.Kind == kind && t.Spec.Owner.Name == owner && t.Spec.DesiredState == legion.TaskRunning && ok(t) {
			n++
		}
	}
	return n
}
