package server

import (
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// admitFinishedJobs refuses a change to the spec of a Job that has
// finished: it starts nothing more (its state is complete or failed for
// good), so the change would be stored and never run. Its labels may
// still change, and applying it unchanged is no change. As with
// Kubernetes, a Job is run again by deleting it and applying it anew.
// A write whose caller named another version (a create, expecting none)
// is left to its precondition, which answers the question it asked: the
// Job exists.
func admitFinishedJobs(_ *store.Store, a *admission) ([]string, error) {
	var errs []string
	for _, c := range a.changed {
		if c.obj.GetKind() != legion.KindJob {
			continue
		}
		cur, ok := a.current[legion.ObjectKey(c.obj)].(*legion.Job)
		if !ok || !cur.Status.State.Over() || sameSpec(cur, c.obj) || checkExpected(c.expected, cur) != nil {
			continue
		}
		m := c.obj.GetMetadata()
		errs = append(errs, fmt.Sprintf("Job %s: it is %s, and a finished Job runs nothing more, so its spec cannot change; "+
			"to run it again, delete it (legion delete job %s -n %s) and apply it again",
			legion.DisplayName(c.obj), cur.Status.State, m.Name, m.Namespace))
	}
	return errs, nil
}
