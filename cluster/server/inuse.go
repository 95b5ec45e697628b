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

// maxUsersNamed is how many of a Secret's, Config's or Volume's users a
// refused delete names.
const maxUsersNamed = 5

// refuseInUse refuses (FailedPrecondition) deleting a Secret, Config or
// Volume that a workload of its namespace still names: as Swarm refuses,
// since apply refuses a workload naming one that does not exist, and every
// task started from then on would fail for want of it. A Job that is over
// starts no more tasks and does not count, nor does one whose CronJob is
// gone, which the planner deletes (a delete -f of both, say). A Volume is
// also in use while a live task mounts it, or a stateful service's wanted
// ordinal claims it: deleted, the planner would make the claim's Volume
// again, empty, and a running pod would lose its data at its next start
// (docker volume rm refuses, and Kubernetes holds a claim a pod uses).
//
// gone, when not nil, says which objects to take as deleted already (a
// dry run's earlier deletes): workloads among them use nothing.
func refuseInUse(st *store.Store, kind legion.Kind, ns, name string, gone func(legion.Kind, string, string) bool) error {
	if kind != legion.KindSecret && kind != legion.KindConfig && kind != legion.KindVolume {
		return nil
	}
	if _, _, err := st.Get(kind, ns, name); err != nil {
		return nil // the delete says what became of it
	}
	if gone == nil {
		gone = func(legion.Kind, string, string) bool { return false }
	}
	uses := func(o legion.Object) bool {
		if gone(o.GetKind(), ns, o.GetMetadata().Name) {
			return false
		}
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
		crons[o.GetMetadata().Name] = !gone(legion.KindCronJob, ns, o.GetMetadata().Name)
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
	if kind == legion.KindVolume {
		more, err := volumeUsers(st, ns, name)
		if err != nil {
			return toStatus(err)
		}
		users = append(users, more...)
	}
	if len(users) == 0 {
		return nil
	}
	named := strings.Join(users[:min(len(users), maxUsersNamed)], ", ")
	if len(users) > maxUsersNamed {
		named += fmt.Sprintf(" and %d more", len(users)-maxUsersNamed)
	}
	how := "take it out of their specs, or delete them, first"
	if kind == legion.KindVolume {
		how = "take it out of their specs, scale the stateful service below its ordinal, or delete them, and let their tasks stop, first"
	}
	return status.Errorf(codes.FailedPrecondition, "%s %s/%s is in use by %s: %s (nothing deleted)", kind, ns, name, named, how)
}

// volumeUsers is what holds Volume ns/name besides the workloads naming
// it: stateful services whose wanted ordinal claims it, and live tasks
// mounting it (one still stopping, or of a service scaled down).
func volumeUsers(st *store.Store, ns, name string) ([]string, error) {
	var users []string
	svcs, _, err := st.List(legion.KindService, ns, func(o legion.Object) bool {
		s := o.(*legion.Service)
		if s.Spec.Mode != legion.ModeStateful {
			return false
		}
		for ord := range s.WantedReplicas() {
			for _, pv := range s.Spec.Pod.Volumes {
				if pv.Claim != nil && scheduler.ClaimName(pv.Name, s.Metadata.Name, ord) == name {
					return true
				}
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	for _, o := range svcs {
		users = append(users, "service/"+o.GetMetadata().Name+" (its claim)")
	}
	tasks, _, err := st.List(legion.KindTask, ns, func(o legion.Object) bool {
		t := o.(*legion.Task)
		if t.Status.State.Terminal() {
			return false
		}
		for _, v := range t.Spec.Volumes {
			if v == name {
				return true
			}
		}
		return false
	})
	if err != nil {
		return nil, err
	}
	for _, o := range tasks {
		users = append(users, "task/"+o.GetMetadata().Name)
	}
	return users, nil
}
