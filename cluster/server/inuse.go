package server

import (
	"fmt"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/scheduler"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxUsersNamed is how many of a Secret's or Config's users a refused
// delete names.
const maxUsersNamed = 5

// refuseInUse refuses (FailedPrecondition) deleting a Secret or Config
// that a workload of its namespace still names: as Swarm refuses, since
// apply refuses a workload naming one that does not exist, and every
// task started from then on would fail for want of it. A Job that is over
// starts no more tasks and does not count, nor does one whose CronJob is
// gone, which the planner deletes (a delete -f of both, say).
func refuseInUse(st *store.Store, kind legion.Kind, ns, name string) error {
	if kind != legion.KindSecret && kind != legion.KindConfig {
		return nil
	}
	if _, _, err := st.Get(kind, ns, name); err != nil {
		return nil // the delete says what became of it
	}
	uses := func(o legion.Object) bool {
		pod := legion.PodOf(o)
		if pod == nil {
			return false
		}
		found := false
		pod.References(func(k legion.Kind, n, _ string) { found = found || k == kind && n == name })
		return found
	}
	// Every CronJob is read once: its name says whether its Jobs live
	// on, and its pod whether it is a user itself.
	cjs, _, err := st.List(legion.KindCronJob, ns, nil)
	if err != nil {
		return toStatus(err)
	}
	crons := map[string]bool{}
	for _, o := range cjs {
		crons[o.GetMetadata().Name] = true
	}
	var users []string
	for _, k := range []legion.Kind{legion.KindService, legion.KindJob} {
		objs, _, err := st.List(k, ns, func(o legion.Object) bool {
			if j, ok := o.(*legion.Job); ok {
				if c, made := j.Metadata.Labels[scheduler.LabelCronJob]; j.Status.State.Over() || made && !crons[c] {
					return false
				}
			}
			return uses(o)
		})
		if err != nil {
			return toStatus(err)
		}
		for _, o := range objs {
			users = append(users, strings.ToLower(string(o.GetKind()))+"/"+o.GetMetadata().Name)
		}
	}
	for _, o := range cjs {
		if uses(o) {
			users = append(users, "cronjob/"+o.GetMetadata().Name)
		}
	}
	if len(users) == 0 {
		return nil
	}
	named := strings.Join(users[:min(len(users), maxUsersNamed)], ", ")
	if len(users) > maxUsersNamed {
		named += fmt.Sprintf(" and %d more", len(users)-maxUsersNamed)
	}
	return status.Errorf(codes.FailedPrecondition, "%s %s/%s is in use by %s: take it out of their specs, or delete them, first (nothing deleted)",
		kind, ns, name, named)
}
