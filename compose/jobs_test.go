package compose

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// A job mode's replicas are a Job's completions, so at least one; the
// range is checked as a service's replicas are.
func TestJobReplicasAreCompletions(t *testing.T) {
	t.Parallel()
	convert := func(replicas string) (*Result, error) {
		text := "services:\n  migrate:\n    image: registry.example/migrate:1\n    deploy: {mode: replicated-job, replicas: " + replicas + "}\n"
		return Convert(context.Background(), []File{{Name: "compose.yaml", Content: []byte(text)}}, Options{Stack: "app"})
	}
	res, err := convert("4")
	if err != nil {
		t.Fatal(err)
	}
	var job *legion.Job
	for _, o := range res.Objects {
		if j, ok := o.(*legion.Job); ok {
			job = j
		}
	}
	if job == nil || job.Spec.Mode != legion.JobReplicated || job.Spec.Completions != 4 || job.Spec.Parallelism != 4 {
		t.Fatalf("replicated-job with 4 replicas: %+v, want a replicated Job of 4 completions run at once", job)
	}
	for replicas, want := range map[string]string{
		"0":      "services.migrate.deploy.replicas: 0 is out of range: a replicated-job runs 1 to 65536 tasks to completion",
		"100000": "services.migrate.deploy.replicas: 100000 is out of range",
	} {
		if _, err := convert(replicas); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("replicas %s: %v, want %q", replicas, err, want)
		}
	}
}
