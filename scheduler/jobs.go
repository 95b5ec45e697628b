package scheduler

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
)

// jobOwner runs a Job: completion slots (or a slot per eligible node),
// parallelism, retries with backoff, the backoff limit and the active
// deadline.
func (p *planner) jobOwner(o *owner) {
	j := o.job
	if p.deletedJobs[j] {
		p.ownerGone(o)
		return
	}
	st := j.Status
	if st.State == "" {
		st.State = legion.JobRunning
	}
	if st.Started == nil {
		now := p.now
		st.Started = &now
	}
	// Failures against the backoff limit: failed tasks, and, as
	// Kubernetes counts them, the restarts of live tasks' containers. A
	// task restarting in place (restart condition on-failure with no
	// limit on attempts) never fails; without its restarts a crash loop
	// would run until the deadline, or for ever, and hold its CronJob's
	// later runs under concurrencyPolicy forbid.
	failed, restarts, restarting := 0, 0, 0
	var lastFail *legion.Task
	for _, e := range o.all {
		t := e.t
		s := stateOf(t)
		switch {
		case s == legion.TaskFailed || s == legion.TaskRejected:
			failed++
		case e.live() && t.Status.Restarts > 0:
			restarts += t.Status.Restarts
			restarting++
		default:
			continue
		}
		if lastFail == nil || ended(t).After(ended(lastFail)) ||
			(ended(t).Equal(ended(lastFail)) && t.Metadata.Name > lastFail.Metadata.Name) {
			lastFail = t
		}
	}
	if st.State == legion.JobRunning {
		// A finished Job keeps its count: the tasks it stopped as it
		// ended are not failed tasks, and would not count again.
		st.Failed = failed
	}

	if st.State == legion.JobRunning {
		switch {
		case j.Spec.ActiveDeadline != nil && !p.now.Before(st.Started.Add(j.Spec.ActiveDeadline.D())):
			p.finishJob(&st, legion.JobFailed, "ran past its activeDeadline of "+j.Spec.ActiveDeadline.String())
		case failed+restarts > *j.Spec.BackoffLimit:
			msg := failures(failed, restarts) + ", more than its backoffLimit of " + strconv.Itoa(*j.Spec.BackoffLimit)
			if lastFail != nil {
				msg += "; the last, " + lastFail.Metadata.Name
				why := lastFail.Status.Message
				if live(lastFail) {
					// A restarting task's message ends with when it
					// restarts, which stopping it makes untrue.
					why, _, _ = strings.Cut(why, ": restarting in ")
					if why == "" {
						why = lastRun(lastFail)
					}
					msg += " (restarted " + times(lastFail.Status.Restarts) + ")"
				}
				switch {
				case why != "":
					msg += ": " + why
				case !live(lastFail):
					msg += ", failed"
				}
			}
			p.finishJob(&st, legion.JobFailed, msg)
			// Tasks whose containers' restarts failed the Job count as
			// failed, as Kubernetes counts their pods: the Job stops
			// them for it, so no state of theirs will say so.
			st.Failed = failed + restarting
		default:
			if u := p.unstartable(o); u != nil {
				msg := "task " + u.Metadata.Name + " failed as unstartable"
				if u.Status.Message != "" {
					msg += ": " + u.Status.Message
				}
				p.finishJob(&st, legion.JobFailed, msg)
			} else if j.Spec.ActiveDeadline != nil {
				p.wake(st.Started.Add(j.Spec.ActiveDeadline.D()))
			}
		}
	}
	if st.State != legion.JobRunning {
		for _, e := range o.all {
			p.stop(e, "job "+string(st.State))
		}
	} else if o.global {
		p.globalJob(o, &st)
	} else {
		p.replicatedJob(o, &st)
	}
	p.jobHistory(o, st.State != legion.JobRunning)

	if st.State == legion.JobRunning {
		slices.Sort(o.messages)
		st.Message = strings.Join(slices.Compact(o.messages), "; ")
	}
	st.Active, st.Succeeded = 0, 0
	for _, e := range o.all {
		switch {
		case e.live():
			st.Active++
		case e.st == legion.TaskComplete:
			st.Succeeded++
		}
	}
	if !reflect.DeepEqual(st, j.Status) {
		out := *j
		out.Status = st
		p.jobOut[j] = &out
	}
}

// jobHistory says of each ended task of a Job that nothing runs it
// again: a completed task is desired complete; a failed try that a later
// one replaced, or any ended task of a Job that is over, shutdown.
func (p *planner) jobHistory(o *owner, over bool) {
	for _, e := range o.all {
		switch {
		case e.deleted || e.live() || !e.run:
		case e.st == legion.TaskComplete:
			p.mut(e).Spec.DesiredState = legion.TaskComplete
			e.run = false
		case over:
			p.endedShutdown(e)
		}
	}
	if !over {
		o.eachSlot(p.shutReplaced)
	}
}

// failures says what counted against a Job's backoff limit.
func failures(failed, restarts int) string {
	var parts []string
	if failed > 0 {
		parts = append(parts, counted(failed, "task")+" failed")
	}
	switch restarts {
	case 0:
	case 1:
		parts = append(parts, "a running task's container restarted once")
	default:
		parts = append(parts, "containers of running tasks restarted "+times(restarts))
	}
	return strings.Join(parts, " and ")
}

// lastRun is how a restarted container of t last ended, as its status
// says ("container c exited with 3"), or "" when none says.
func lastRun(t *legion.Task) string {
	for _, c := range t.Status.Containers {
		if c.Restarts > 0 && c.Message != "" {
			return "container " + c.Name + " " + c.Message
		}
	}
	return ""
}

// counted is n and noun, plural unless n is 1 ("1 task", "2 tasks").
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// times is n as in "restarted n times".
func times(n int) string {
	if n == 1 {
		return "once"
	}
	return strconv.Itoa(n) + " times"
}

func (p *planner) finishJob(st *legion.JobStatus, state legion.JobState, msg string) {
	now := p.now
	st.State, st.Message, st.Finished = state, msg, &now
}

// slotComplete: a task in the slot completed.
func slotComplete(s *slot) bool {
	for _, e := range s.entries {
		if e.st == legion.TaskComplete {
			return true
		}
	}
	return false
}

func (p *planner) replicatedJob(o *owner, st *legion.JobStatus) {
	j := o.job
	for _, s := range o.slotList() {
		if s.key < 1 || s.key > j.Spec.Completions {
			p.retireLive(s, "not a completion slot")
		}
	}
	active := 0
	for k := 1; k <= j.Spec.Completions; k++ {
		if s := o.getSlot(k); s != nil && !slotComplete(s) && p.jobSlotLive(s) {
			active++
		}
	}
	done := 0
	for k := 1; k <= j.Spec.Completions; k++ {
		s := p.slotOf(o, k)
		if slotComplete(s) {
			done++
			continue
		}
		if p.jobSlotLive(s) {
			p.jobSlotRun(s)
			continue
		}
		if active >= j.Spec.Parallelism {
			continue
		}
		if p.jobRetry(o, s) {
			active++
		}
	}
	if done == j.Spec.Completions {
		p.finishJob(st, legion.JobComplete, "")
	}
}

func (p *planner) globalJob(o *owner, st *legion.JobStatus) {
	p.prepare(o)
	eligible, done := 0, 0
	for i, n := range p.nodes {
		s := o.byNode[n.name]
		if s != nil && slotComplete(s) {
			done++
			continue
		}
		switch o.static[i].code {
		case rNone:
			eligible++
			s = p.nodeSlot(o, n.name)
			if p.jobSlotLive(s) {
				p.jobSlotRun(s)
				continue
			}
			p.jobRetry(o, s)
		case rDown, rSuspect, rNotReady, rPaused:
			if s != nil && p.jobSlotLive(s) {
				eligible++ // it stays with the node
			}
		default:
			if s != nil {
				p.retireLive(s, "node "+n.name+" is no longer eligible")
			}
		}
	}
	if eligible == 0 && done > 0 {
		p.finishJob(st, legion.JobComplete, "")
	}
}

// unstartable is a task that failed as unstartable, running the Job's pod
// as it is now, in a slot the Job still needs (nil: none; the first by
// name when several). Started again it would fail the same way, so the
// Job can never finish: it fails, rather than running with nothing to
// run, holding its CronJob's next runs under concurrencyPolicy forbid.
func (p *planner) unstartable(o *owner) *legion.Task {
	var found *legion.Task
	o.eachSlot(func(s *slot) {
		switch {
		case !o.global && (s.key < 1 || s.key > o.job.Spec.Completions):
			return // not a completion slot
		case o.global && !p.eligibleSlot(o, s):
			return
		case slotComplete(s) || p.jobSlotLive(s):
			return
		}
		if last := s.lastTerminal(); last != nil && unstartable(o, last) &&
			(found == nil || last.t.Metadata.Name < found.Metadata.Name) {
			found = last.t
		}
	})
	return found
}

// unstartable: e failed as unstartable running o's pod as it is now.
func unstartable(o *owner, e *entry) bool {
	st := stateOf(e.t)
	return (st == legion.TaskFailed || st == legion.TaskRejected) && e.t.Status.Permanent && e.t.Spec.PodHash == o.hash
}

// eligibleSlot: a global Job's slot whose node may run it now.
func (p *planner) eligibleSlot(o *owner, s *slot) bool {
	i, ok := p.nodeIdx[s.node]
	if !ok {
		return false
	}
	p.prepare(o)
	return o.static[i].code == rNone
}

// jobSlotLive: the slot has a live task meant to run.
func (p *planner) jobSlotLive(s *slot) bool {
	for _, e := range s.entries {
		if e.live() {
			return true
		}
	}
	return false
}

// jobSlotRun places a pending task and moves a task off a draining node
// (retried elsewhere without counting as a failure).
func (p *planner) jobSlotRun(s *slot) {
	for _, e := range s.entries {
		t := e.t
		if !live(t) || t.Spec.DesiredState != legion.TaskRunning {
			continue
		}
		if why := p.leaveReason(e); why != "" {
			p.stop(e, why)
			continue
		}
		if taint, bad := p.noExecute(e); bad {
			p.stop(e, "evicted by taint "+taint.String())
			continue
		}
		if msg := p.forbiddenUnstarted(e); msg != "" {
			p.stop(e, "not started: "+msg)
			continue
		}
		if stateOf(t) == legion.TaskPending && t.Spec.Placed == nil {
			p.placeTask(e)
		}
	}
}

func (p *planner) noExecute(e *entry) (legion.Taint, bool) {
	if e.node < 0 {
		return legion.Taint{}, false
	}
	return untolerated(p.nodes[e.node].n, e.owner.placement.Tolerations, legion.NoExecute)
}

// jobRetry starts the slot's next task: at once after a stop or a lost
// node, 10 s after a failure doubling per failure in a row up to 60 s.
func (p *planner) jobRetry(o *owner, s *slot) bool {
	failures := 0
	if last := s.lastTerminal(); last != nil {
		if st := stateOf(last.t); st == legion.TaskFailed || st == legion.TaskRejected {
			failures = failuresInRow(s)
			if unstartable(o, last) {
				return false // the Job has failed (see jobOwner)
			}
			at := ended(last.t).Add(backoff(JobRetryDelay, failures, MaxRestartDelay))
			if at.After(p.now) {
				p.wake(at)
				// Said, as a Job with no task running still runs: the
				// time is absolute, so the status is written once.
				why := ""
				if m := last.t.Status.Message; m != "" {
					why = " (" + m + ")"
				}
				o.messages = append(o.messages, "task "+last.t.Metadata.Name+" failed"+why+
					": the next try starts at "+at.UTC().Truncate(time.Second).Format(time.RFC3339))
				return false
			}
		}
	}
	if !p.imagesReady(o) {
		return false
	}
	if why := p.overTaskQuota(o.key.ns); why != "" {
		o.messages = append(o.messages, why)
		return false
	}
	if !p.mayCreate(o) {
		return false
	}
	e := p.newTask(o, s)
	withFailures(e, failures)
	p.placeTask(e)
	return true
}
