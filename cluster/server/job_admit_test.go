package server

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/grpc/codes"
)

// A finished Job's spec is refused a change, which would be stored and
// never run; the same Job applied again, or with new labels, is not a
// change of spec, and a running Job's spec may change.
func TestAdmissionRefusesChangingAFinishedJob(t *testing.T) {
	t.Parallel()
	m, c := admitFixture(t)
	job := func(image, labels string) string {
		return "apiVersion: legion/v1\nkind: Job\nmetadata: {name: once, namespace: jobs" + labels + "}\n" +
			"spec:\n  pod: {containers: [{name: c, image: " + image + "}]}\n"
	}
	applyOK(t, c, "apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: jobs}\n")
	applyOK(t, c, job("j:1", ""))
	applyOK(t, c, job("j:2", "")) // running: its next tasks run the new pod

	for _, state := range []legion.JobState{legion.JobFailed, legion.JobComplete} {
		st := m.s.Store()
		o, _, err := st.Get(legion.KindJob, "jobs", "once")
		if err != nil {
			t.Fatal(err)
		}
		j := o.(*legion.Job)
		j.Status.State = state
		if _, err := st.PutStatus(context.Background(), j, store.Precondition{}); err != nil {
			t.Fatal(err)
		}
		applyRefused(t, m, c, job("j:3", ""), codes.FailedPrecondition,
			"Job jobs/once: it is "+string(state), "its spec cannot change", "legion delete job once -n jobs")
		applyOK(t, c, job("j:2", ""))
		applyOK(t, c, job("j:2", ", labels: {team: "+strings.ToLower(string(state))+"}"))
		// A create (no object expected) is told the Job exists, its
		// precondition answered before the rule of finished Jobs.
		none := uint64(0)
		_, err = c.Apply(context.Background(), mustParse(t, job("j:3", "")), client.ApplyOptions{ExpectedVersion: &none})
		if client.Code(err) != codes.Aborted || !strings.Contains(err.Error(), "Job jobs/once: already exists") {
			t.Errorf("a create over the %s Job: %v (%s), want Aborted", state, err, client.Code(err))
		}
	}
}
