package events

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
)

// Tracked reports whether events are derived from objects of the kind.
func Tracked(k legion.Kind) bool {
	switch k {
	case legion.KindTask, legion.KindService, legion.KindJob, legion.KindCronJob, legion.KindNode, legion.KindVolume:
		return true
	}
	return false
}

// Derive returns the events of one change to an object: old is nil for
// an object added, nw nil for one deleted. The events carry now, a count
// of one and no sequence (the ring gives it).
func Derive(old, nw legion.Object, now time.Time) []legion.Event {
	o := nw
	if o == nil {
		o = old
	}
	if o == nil || !Tracked(o.GetKind()) || o.GetMetadata().Namespace == legion.SystemNamespace {
		return nil
	}
	d := deriver{now: now, ref: refOf(o)}
	switch n := nw.(type) {
	case *legion.Task:
		p, _ := old.(*legion.Task)
		d.task(p, n)
	case *legion.Service:
		p, _ := old.(*legion.Service)
		d.service(p, n)
	case *legion.Job:
		p, _ := old.(*legion.Job)
		d.job(p, n)
	case *legion.CronJob:
		p, _ := old.(*legion.CronJob)
		d.cronJob(p, n)
	case *legion.Node:
		p, _ := old.(*legion.Node)
		d.node(p, n)
	case *legion.Volume:
		p, _ := old.(*legion.Volume)
		d.volume(p, n)
	case nil:
		if old.GetKind() == legion.KindNode {
			d.add(legion.EventNormal, legion.ReasonNodeRemoved, "removed from the cluster")
		}
	}
	return d.out
}

func refOf(o legion.Object) legion.ObjectRef {
	m := o.GetMetadata()
	return legion.ObjectRef{Kind: o.GetKind(), Namespace: m.Namespace, Name: m.Name, UID: m.UID}
}

type deriver struct {
	now time.Time
	ref legion.ObjectRef
	out []legion.Event
}

func (d *deriver) add(t legion.EventType, reason, msg string) {
	d.out = append(d.out, legion.Event{Time: d.now, Type: t, Reason: reason, Object: d.ref, Message: msg, Count: 1})
}

// quotaPrefix starts the planner's message for a task its namespace's
// quota keeps pending.
const quotaPrefix = "over the quota of namespace "

// attempt is the agent's count at the end of a restart message; dropped
// so that the same backoff repeated coalesces into one event.
var attempt = regexp.MustCompile(`\s*\(attempt \d+\)$`)

func (d *deriver) task(old, t *legion.Task) {
	was := legion.TaskState("")
	var oldMsg string
	if old != nil {
		was, oldMsg = stateOf(old), old.Status.Message
	}
	now, msg := stateOf(t), t.Status.Message
	if was == now {
		if msg == "" || msg == oldMsg {
			return
		}
		switch now {
		case legion.TaskPending:
			d.pending(msg)
		case legion.TaskRunning:
			switch {
			case strings.Contains(msg, "restarting in"):
				d.add(legion.EventWarning, legion.ReasonBackOff, attempt.ReplaceAllString(msg, ""))
			case strings.Contains(msg, "probe failed"), strings.Contains(msg, " not ready: "):
				d.add(legion.EventWarning, legion.ReasonProbeFailed, msg)
			}
		}
		return
	}
	switch now {
	case legion.TaskPending:
		if msg != "" {
			d.pending(msg)
		}
	case legion.TaskAssigned:
		d.add(legion.EventNormal, legion.ReasonScheduled, "assigned to node "+t.Spec.Node)
	case legion.TaskRunning:
		d.add(legion.EventNormal, legion.ReasonTaskStarted, join("started on node "+t.Spec.Node, msg))
	case legion.TaskComplete:
		d.add(legion.EventNormal, legion.ReasonTaskCompleted, join("completed on node "+t.Spec.Node, msg))
	case legion.TaskFailed:
		if strings.HasPrefix(msg, "pulling ") {
			d.add(legion.EventWarning, legion.ReasonImagePullFailed, msg)
		}
		d.add(legion.EventWarning, legion.ReasonTaskFailed, join("failed on node "+t.Spec.Node, msg))
	case legion.TaskRejected:
		if p := t.Status.WrongPlatform; p != nil {
			d.add(legion.EventWarning, legion.ReasonWrongPlatform, join("no image for "+p.OS+"/"+p.Arch+" on node "+t.Spec.Node, msg))
			return
		}
		d.add(legion.EventWarning, legion.ReasonTaskRejected, join("rejected by node "+t.Spec.Node, msg))
	case legion.TaskShutdown:
		d.add(legion.EventNormal, legion.ReasonTaskStopped, t.Message())
	case legion.TaskOrphaned:
		d.add(legion.EventWarning, legion.ReasonTaskOrphaned, join("lost with node "+t.Spec.Node, msg))
	}
}

func stateOf(t *legion.Task) legion.TaskState {
	if t.Status.State == "" {
		return legion.TaskPending
	}
	return t.Status.State
}

// pending says why the planner keeps a task from every node.
func (d *deriver) pending(msg string) {
	if strings.HasPrefix(msg, quotaPrefix) {
		d.add(legion.EventWarning, legion.ReasonQuotaRefused, msg)
		return
	}
	d.add(legion.EventWarning, legion.ReasonUnschedulable, msg)
}

func join(what, msg string) string {
	if msg == "" {
		return what
	}
	return what + ": " + msg
}

var updateReasons = map[legion.UpdateState]struct {
	t      legion.EventType
	reason string
}{
	legion.UpdateUpdating:       {legion.EventNormal, legion.ReasonUpdateStarted},
	legion.UpdateCompleted:      {legion.EventNormal, legion.ReasonUpdateCompleted},
	legion.UpdatePaused:         {legion.EventWarning, legion.ReasonUpdatePaused},
	legion.UpdateRollingBack:    {legion.EventWarning, legion.ReasonUpdateRollingBack},
	legion.UpdateRolledBack:     {legion.EventWarning, legion.ReasonUpdateRolledBack},
	legion.UpdateRollbackPaused: {legion.EventWarning, legion.ReasonRollbackPaused},
}

func (d *deriver) service(old, s *legion.Service) {
	var ou *legion.UpdateStatus
	var oldImages string
	if old != nil {
		ou = old.Status.Update
		if old.Status.Images != nil {
			oldImages = old.Status.Images.Message
		}
	}
	if nu := s.Status.Update; nu != nil && (ou == nil || ou.State != nu.State || !sameTime(ou.Started, nu.Started)) {
		if r, ok := updateReasons[nu.State]; ok {
			msg := nu.Message
			if nu.State == legion.UpdateUpdating {
				msg = join("to generation "+strconv.FormatUint(s.Metadata.Generation, 10), msg)
			}
			d.add(r.t, r.reason, msg)
		}
	}
	if im := s.Status.Images; im != nil && im.Message != "" && im.Message != oldImages {
		d.add(legion.EventWarning, legion.ReasonImageResolveFailed, im.Message)
	}
	// The count a replicated or stateful service wants, changed by a
	// scale (its spec) or its autoscaler (its status).
	if old != nil && old.Spec.Replicas != nil && s.Spec.Replicas != nil && s.Spec.Mode != legion.ModeGlobal {
		if was, now := old.WantedReplicas(), s.WantedReplicas(); was != now {
			by := ""
			if s.Spec.Autoscale != nil && *old.Spec.Replicas == *s.Spec.Replicas {
				by = " by its autoscaler"
			}
			d.add(legion.EventNormal, legion.ReasonScaled, fmt.Sprintf("from %d to %d replicas%s", was, now, by))
		}
	}
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func (d *deriver) job(old, j *legion.Job) {
	var was legion.JobState
	if old != nil {
		was = old.Status.State
	}
	if j.Status.State == was {
		return
	}
	switch j.Status.State {
	case legion.JobRunning:
		d.add(legion.EventNormal, legion.ReasonJobStarted, j.Status.Message)
	case legion.JobComplete:
		d.add(legion.EventNormal, legion.ReasonJobSucceeded, j.Status.Message)
	case legion.JobFailed:
		d.add(legion.EventWarning, legion.ReasonJobFailed, j.Status.Message)
	}
}

// cronJob says of each run that fell due whether it made a Job or was
// skipped (suspended, late, or forbidden while a Job still runs): the
// planner moves status.lastSchedule to the run, with a message when it
// was skipped. A run's Job is named after its minute since the epoch.
func (d *deriver) cronJob(old, c *legion.CronJob) {
	due := c.Status.LastSchedule
	if due == nil || old != nil && sameTime(old.Status.LastSchedule, due) {
		return
	}
	if msg := c.Status.Message; strings.HasPrefix(msg, legion.CronJobSkipped) {
		d.add(legion.EventWarning, legion.ReasonRunSkipped, msg)
		return
	}
	d.add(legion.EventNormal, legion.ReasonJobCreated, "job "+legion.CronJobRunName(c.Metadata.Name, *due)+
		" for the run of "+due.UTC().Format(time.RFC3339))
}

func (d *deriver) node(old, n *legion.Node) {
	if old == nil {
		d.add(legion.EventNormal, legion.ReasonNodeJoined, "joined as "+string(n.Spec.Role))
		old = &legion.Node{}
	}
	if n.Status.State != old.Status.State {
		switch n.Status.State {
		case legion.NodeReady:
			d.add(legion.EventNormal, legion.ReasonNodeReady, join("heartbeats arrive", n.Status.Message))
		case legion.NodeSuspect:
			d.add(legion.EventWarning, legion.ReasonNodeSuspect, join("heartbeats missed", n.Status.Message))
		case legion.NodeDown:
			d.add(legion.EventWarning, legion.ReasonNodeDown, join("heartbeats stopped; its tasks are orphaned", n.Status.Message))
		}
	}
	if a, was := n.Spec.Availability, old.Spec.Availability; a != was && (was != "" || a != legion.AvailabilityActive) {
		switch a {
		case legion.AvailabilityDrain:
			d.add(legion.EventNormal, legion.ReasonNodeDraining, "moving its tasks elsewhere")
		case legion.AvailabilityPause:
			d.add(legion.EventNormal, legion.ReasonNodePaused, "no new tasks")
		case legion.AvailabilityActive:
			d.add(legion.EventNormal, legion.ReasonNodeActive, "takes tasks again")
		}
	}
	d.publishErrors(old.Status.PublishErrors, n.Status.PublishErrors)
	if p := n.Status.MemoryPressure; p != old.Status.MemoryPressure {
		if p {
			d.add(legion.EventWarning, legion.ReasonMemoryPressure, "available memory below its agent's eviction threshold: tasks requesting no memory are evicted and not placed here")
		} else {
			d.add(legion.EventNormal, legion.ReasonMemoryPressureOver, "available memory above its agent's eviction threshold again")
		}
	}
	var was legion.DrainState
	if old.Status.Drain != nil {
		was = old.Status.Drain.State
	}
	if dr := n.Status.Drain; dr != nil && dr.State != was {
		switch dr.State {
		case legion.DrainCompleted:
			d.add(legion.EventNormal, legion.ReasonNodeDrained, "nothing left on it")
		case legion.DrainBlocked:
			items := make([]string, 0, len(dr.Remaining))
			for _, it := range dr.Remaining {
				items = append(items, string(it.Kind)+" "+it.Name+": "+it.Reason)
			}
			d.add(legion.EventWarning, legion.ReasonDrainBlocked, strings.Join(items, "; "))
		}
	}
}

// publishErrors tells of each published port the node newly cannot
// serve, and of each it serves again.
func (d *deriver) publishErrors(was, now []legion.PortError) {
	before := map[int]string{}
	for _, p := range was {
		before[p.Port] = p.Error
	}
	after := map[int]bool{}
	for _, p := range now {
		after[p.Port] = true
		if before[p.Port] != p.Error {
			d.add(legion.EventWarning, legion.ReasonPortNotPublished, fmt.Sprintf("published port %d not served here: %s", p.Port, p.Error))
		}
	}
	for _, p := range was {
		if !after[p.Port] {
			d.add(legion.EventNormal, legion.ReasonPortPublished, fmt.Sprintf("published port %d served again", p.Port))
		}
	}
}

func (d *deriver) volume(old, v *legion.Volume) {
	if old == nil {
		old = &legion.Volume{}
	}
	if m := v.Status.Migration; m != nil && old.Status.Migration == nil {
		d.add(legion.EventNormal, legion.ReasonVolumeMoving, "from node "+m.From+" to node "+m.To)
	}
	if from, to := old.Status.Node, v.Status.Node; from != "" && to != "" && from != to {
		d.add(legion.EventNormal, legion.ReasonVolumeMoved, "from node "+from+" to node "+to)
	}
}
