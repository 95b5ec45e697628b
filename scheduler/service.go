package scheduler

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
)

// svcPass is what one service's pass carries from slot to slot.
type svcPass struct {
	o           *owner
	status      legion.ServiceStatus
	paused      bool // the update stopped replacing outdated tasks
	budget      int  // slots the update may still start on
	maxUnavail  int  // -1: no disruption budget
	unavailable int  // wanted slots without a ready task
	startFirst  bool
	stopOnly    bool // stateful: always stop-first
	done        bool // every wanted slot runs a settled current task
	monitor     time.Duration
	delay       time.Duration
	wanted      int
	badHash     string // the pod a rollback left: its failed slots refill at once
}

// service reconciles one service: its update state, its slots, and its
// status.
func (p *planner) service(o *owner) {
	svc := o.svc
	sp := &svcPass{o: o, status: svc.Status, maxUnavail: -1, done: true}
	if p.updateState(o, sp) {
		return
	}
	u := svc.Spec.Update
	sp.monitor = legion.DefaultMonitor.D()
	if u.Monitor != nil {
		sp.monitor = u.Monitor.D()
	}
	sp.delay = u.Delay.D()
	sp.startFirst = u.Order == legion.StartFirst
	sp.stopOnly = o.stateful
	if u.MaxUnavailable != nil {
		sp.maxUnavail = *u.MaxUnavailable
	}
	if up := sp.status.Update; up != nil {
		sp.paused = up.State == legion.UpdatePaused || up.State == legion.UpdateRollbackPaused
		if up.State == legion.UpdateRollingBack || up.State == legion.UpdateRolledBack || up.State == legion.UpdateRollbackPaused {
			if up.PreviousSpec != nil {
				sp.badHash = PodHash(&up.PreviousSpec.Pod)
			}
		}
	}
	o.snap = updateSnapshot(o, sp.status.Update)
	wanted := p.autoscale(o, sp)
	switch svc.Spec.Mode {
	case legion.ModeGlobal:
		p.globalSlots(o, sp)
	case legion.ModeStateful:
		sp.wanted = wanted
		p.statefulSlots(o, sp)
	default:
		sp.wanted = wanted
		p.replicatedSlots(o, sp)
	}
	o.wanted = sp.wanted
	p.pruneHistory(o)
	p.serviceStatus(o, sp)
}

// updateState follows the pod in the spec: a change starts an update, a
// change back to the spec the update came from is a rollback, and a new
// task failing within the monitor window sets off the failure action. It
// reports true when it wrote the previous spec back (the next pass goes on
// from there).
func (p *planner) updateState(o *owner, sp *svcPass) bool {
	svc := o.svc
	st := &sp.status
	cur := svc.Spec
	if st.Spec == nil {
		st.Spec = &cur
	} else if !reflect.DeepEqual(st.Spec.Pod, cur.Pod) && PodHash(&st.Spec.Pod) != o.hash {
		now := p.now
		prev := st.Spec
		u := st.Update
		if u != nil && u.PreviousSpec != nil && PodHash(&u.PreviousSpec.Pod) == o.hash &&
			(u.State == legion.UpdateUpdating || u.State == legion.UpdatePaused || u.State == legion.UpdateCompleted) {
			// The rollback's tasks restore the update's snapshot.
			st.Update = &legion.UpdateStatus{State: legion.UpdateRollingBack, Started: &now, PreviousSpec: prev,
				Message: "rolling back to the spec the update came from", Snapshot: u.Snapshot}
		} else {
			st.Update = &legion.UpdateStatus{State: legion.UpdateUpdating, Started: &now, PreviousSpec: prev}
			if o.stateful && cur.Update.Snapshot {
				// The agents snapshot each claimed Volume under this name
				// before the update's task runs (4.3).
				st.Update.Snapshot = "legion-update-" + strconv.FormatUint(o.gen, 10)
			}
		}
		st.Spec = &cur
	} else if !reflect.DeepEqual(*st.Spec, cur) {
		st.Spec = &cur
	}
	u := st.Update
	if u == nil || (u.State != legion.UpdateUpdating && u.State != legion.UpdateRollingBack) || u.Started == nil {
		return false
	}
	monitor := legion.DefaultMonitor.D()
	if svc.Spec.Update.Monitor != nil {
		monitor = svc.Spec.Update.Monitor.D()
	}
	failed := p.failedWithinMonitor(o, *u.Started, monitor)
	if failed == nil {
		return false
	}
	what := "task " + failed.Metadata.Name + " failed within the monitor window"
	if stateOf(failed) == legion.TaskRunning {
		// Its containers crash and restart; the task itself runs on.
		what = "task " + failed.Metadata.Name + " had its containers restarted within the monitor window"
	}
	if failed.Status.Message != "" {
		what += ": " + failed.Status.Message
	}
	nu := *u
	st.Update = &nu
	if u.State == legion.UpdateRollingBack {
		nu.State, nu.Message = legion.UpdateRollbackPaused, what
		return false
	}
	switch svc.Spec.Update.FailureAction {
	case legion.FailureContinue:
		return false
	case legion.FailureRollback:
		if u.PreviousSpec == nil {
			nu.State, nu.Message = legion.UpdatePaused, what+"; no previous spec to roll back to"
			return false
		}
		out := *svc
		out.Spec = *u.PreviousSpec
		now := p.now
		failedSpec := svc.Spec
		restored := out.Spec
		out.Status = *st
		out.Status.Spec = &restored
		out.Status.Update = &legion.UpdateStatus{State: legion.UpdateRollingBack, Started: &now,
			PreviousSpec: &failedSpec, Message: "rolling back: " + what, Failure: what, Snapshot: u.Snapshot}
		p.svcOut[svc] = &out
		return true
	default:
		nu.State, nu.Message = legion.UpdatePaused, what
		return false
	}
}

// failedWithinMonitor finds a task of the current pod that failed since
// the update started, before it had run for the monitor window.
func (p *planner) failedWithinMonitor(o *owner, since time.Time, monitor time.Duration) *legion.Task {
	var found *legion.Task
	for _, e := range o.all {
		t := e.t
		st := stateOf(t)
		if t.Spec.PodHash != o.hash {
			continue
		}
		if st == legion.TaskRunning && crashedWithin(t, since, monitor) {
			if found == nil || t.Metadata.Name < found.Metadata.Name {
				found = t
			}
			continue
		}
		if st != legion.TaskFailed && st != legion.TaskRejected {
			continue
		}
		end := ended(t)
		if end.Before(since) {
			continue
		}
		if t.Status.Started != nil && end.Sub(*t.Status.Started) >= monitor {
			continue
		}
		if found == nil || t.Metadata.Name < found.Metadata.Name {
			found = t
		}
	}
	return found
}

// crashedWithin reports a running task of the update whose containers the
// agent has already restarted within the monitor window: under a restart
// policy without a limit such a task never fails, yet the update is as
// broken as if it had.
func crashedWithin(t *legion.Task, since time.Time, monitor time.Duration) bool {
	st := t.Status
	if st.Restarts == 0 || st.Started == nil || st.Started.Before(since) {
		return false
	}
	return st.Timestamp.Sub(*st.Started) < monitor
}

// replicatedSlots runs slots 1..wanted and retires the rest.
func (p *planner) replicatedSlots(o *owner, sp *svcPass) {
	for _, s := range o.slotList() {
		if s.key < 1 || s.key > sp.wanted {
			p.retire(s, "scaled down")
		}
	}
	slots := make([]*slot, 0, sp.wanted)
	for k := 1; k <= sp.wanted; k++ {
		slots = append(slots, p.slotOf(o, k))
	}
	views := p.prepareBudget(o, sp, slots)
	for i, s := range slots {
		p.fillSlot(o, sp, s, &views[i], true)
	}
}

// statefulSlots runs ordinals 0..wanted-1: each starts only once every
// lower one has a ready task, updates go from the highest down, and the
// service shrinks from its highest ordinal one task at a time.
func (p *planner) statefulSlots(o *owner, sp *svcPass) {
	p.claimVolumes(o, sp.wanted)
	var extra []*slot
	for _, s := range o.slotList() {
		if s.key < 0 || s.key >= sp.wanted {
			extra = append(extra, s)
		}
	}
	// Shrink one task at a time from the highest ordinal.
	shrinking := false
	for i := len(extra) - 1; i >= 0; i-- {
		s := extra[i]
		var liveOnes []*entry
		for _, e := range s.entries {
			if e.live() {
				liveOnes = append(liveOnes, e)
			}
		}
		if len(liveOnes) == 0 {
			p.retire(s, "")
			continue
		}
		if !shrinking {
			shrinking = true
			for _, e := range liveOnes {
				p.stop(e, "scaled down")
			}
		}
	}
	slots := make([]*slot, 0, sp.wanted)
	for k := 0; k < sp.wanted; k++ {
		slots = append(slots, p.slotOf(o, k))
	}
	// Which ordinals may start: every lower one has a ready task.
	mayStart := make([]bool, len(slots))
	ok := true
	for i, s := range slots {
		mayStart[i] = ok
		if !slotReady(s) {
			ok = false
		}
	}
	views := p.prepareBudget(o, sp, slots)
	for i := len(slots) - 1; i >= 0; i-- {
		p.fillSlot(o, sp, slots[i], &views[i], mayStart[i] && !shrinking)
	}
}

// globalSlots runs one slot per eligible node.
func (p *planner) globalSlots(o *owner, sp *svcPass) {
	p.prepare(o)
	var wanted []*slot
	for i, n := range p.nodes {
		s := o.byNode[n.name]
		st := o.static[i]
		switch st.code {
		case rNone:
			s = p.nodeSlot(o, n.name)
			wanted = append(wanted, s)
		case rDown, rSuspect, rNotReady, rPaused:
			// The slot stays with the node; nothing new starts there.
			if s != nil {
				wanted = append(wanted, s)
			}
		case rTaint:
			if s == nil {
				continue
			}
			if n.n.Spec.Taints[st.idx].Effect == legion.NoExecute {
				p.retireLive(s, "evicted by taint "+n.n.Spec.Taints[st.idx].String())
			} else {
				wanted = append(wanted, s)
			}
		default:
			if s != nil {
				msg := "node " + n.name + " is no longer eligible"
				if st.code == rDraining {
					msg = "node " + n.name + " is draining"
				}
				p.retireLive(s, msg)
			}
		}
	}
	for _, s := range o.sortedNodeSlots() {
		if _, ok := p.nodeIdx[s.node]; !ok {
			p.retire(s, "node "+s.node+" is gone")
		}
	}
	sp.wanted = 0
	for _, s := range wanted {
		i := p.nodeIdx[s.node]
		if o.static[i].code == rNone {
			sp.wanted++
		}
	}
	views := p.prepareBudget(o, sp, wanted)
	for j, s := range wanted {
		i := p.nodeIdx[s.node]
		p.fillSlot(o, sp, s, &views[j], o.static[i].code == rNone)
	}
}

// retire stops a slot no longer wanted and deletes its history.
func (p *planner) retire(s *slot, msg string) {
	for _, e := range s.entries {
		if e.live() {
			p.stop(e, msg)
		}
		if !e.live() {
			p.remove(e)
		}
	}
}

func (p *planner) retireLive(s *slot, msg string) {
	for _, e := range s.entries {
		p.stop(e, msg)
	}
}

// slotView sorts a slot's live tasks: the current one, those it replaces
// (outdated, or on a node they must leave), and those stopping.
type slotView struct {
	cur      *entry
	dups     []*entry
	olds     []*entry
	stopping []*entry
}

func (p *planner) view(o *owner, s *slot) slotView {
	var v slotView
	for _, e := range s.entries {
		if e.deleted || !e.live() {
			continue
		}
		if !e.run {
			v.stopping = append(v.stopping, e)
			continue
		}
		if e.cur && !p.mustLeave(e) {
			// Two current tasks (a surge whose reason went away): the
			// furthest along stays, the newer on a tie.
			if v.cur != nil {
				if progress(e) >= progress(v.cur) {
					v.dups = append(v.dups, v.cur)
					v.cur = e
				} else {
					v.dups = append(v.dups, e)
				}
				continue
			}
			v.cur = e
			continue
		}
		v.olds = append(v.olds, e)
	}
	return v
}

// slotReady: the slot has a ready task meant to run (of any pod).
func slotReady(s *slot) bool {
	for _, e := range s.entries {
		if !e.deleted && e.isReady() && e.run {
			return true
		}
	}
	return false
}

// mustLeave: a task on a draining node (the replacement goes elsewhere),
// or on the node a Volume it mounts is moving off once the copy is in.
func (p *planner) mustLeave(e *entry) bool {
	return p.leaveReason(e) != ""
}

// leaveReason says why a task must leave its node, or "". A task on a
// draining node stays while a Volume it mounts is still being copied off
// it (the reason goes to the drain status).
func (p *planner) leaveReason(e *entry) string {
	if e.node < 0 {
		return ""
	}
	if msg := p.volumeLeave(e); msg != "" {
		return msg
	}
	if p.nodes[e.node].availability() != legion.AvailabilityDrain {
		return ""
	}
	if why := p.volumeStay(e); why != "" {
		e.drainReason = why
		return ""
	}
	return "node " + e.t.Spec.Node + " is draining"
}

// progress ranks how far a task has come: ready, running, placed, pending.
func progress(e *entry) int {
	switch {
	case e.isReady():
		return 3
	case e.st == legion.TaskRunning:
		return 2
	case e.t.Spec.Placed != nil:
		return 1
	}
	return 0
}

func readyTask(t *legion.Task) bool {
	return stateOf(t) == legion.TaskRunning && t.Status.Ready
}

// prepareBudget counts the wanted slots without a ready task (for the
// disruption budget) and those the update has under way (for
// parallelism). It returns the slots' views for fillSlot, in a buffer the
// next service reuses.
func (p *planner) prepareBudget(o *owner, sp *svcPass, slots []*slot) []slotView {
	if cap(p.views) < len(slots) {
		p.views = make([]slotView, len(slots))
	}
	views := p.views[:len(slots)]
	inflight, outdated := 0, false
	for j, s := range slots {
		v := p.view(o, s)
		views[j] = v
		avail := false
		if v.cur != nil && v.cur.isReady() {
			avail = true
		}
		for _, e := range v.olds {
			if e.isReady() {
				avail = true
			}
			if !e.cur {
				outdated = true
			}
		}
		if !avail {
			sp.unavailable++
		}
		for _, e := range v.stopping {
			if !e.cur {
				outdated = true
			}
		}
		switch {
		case v.cur == nil && len(v.olds) == 0:
			// Stopping, or stopped by the update and refilled next; a slot
			// left empty by a failure is no part of the update.
			if len(v.stopping) > 0 {
				inflight++
			} else if last := s.lastTerminal(); last != nil && !last.cur && last.st == legion.TaskShutdown {
				inflight++
			}
		case v.cur != nil && !p.settled(sp, v.cur):
			inflight++
		}
	}
	par := 1
	if pp := o.svc.Spec.Update.Parallelism; pp != nil {
		par = *pp
	}
	if par == 0 {
		par = len(slots)
	}
	sp.budget = par
	if outdated {
		sp.budget = par - inflight
	}
	return views
}

// settled: ready and running for the update's delay.
func (p *planner) settled(sp *svcPass, e *entry) bool {
	t := e.t
	if !e.isReady() || t.Status.Started == nil {
		return false
	}
	at := t.Status.Started.Add(sp.delay)
	if at.After(p.now) {
		p.wake(at)
		return false
	}
	return true
}

// fillSlot converges one wanted slot: evictions, replacement of outdated
// or moving tasks, and a new task when the slot is empty.
func (p *planner) fillSlot(o *owner, sp *svcPass, s *slot, seen *slotView, mayStart bool) {
	v := *seen
	if p.evictNoExecute(o, s) || p.stopForbiddenUnstarted(s) {
		v = p.view(o, s)
	}
	for _, e := range v.dups {
		p.stop(e, "superseded by "+v.cur.t.Metadata.Name)
	}
	if v.cur != nil {
		p.slotDone(sp, v)
		if v.cur.st == legion.TaskPending && v.cur.t.Spec.Placed == nil {
			p.placeTask(v.cur)
		}
		for _, old := range v.olds {
			if v.cur.isReady() {
				p.stop(old, "replaced by "+v.cur.t.Metadata.Name)
			} else {
				old.drainReason = "waiting for its replacement " + v.cur.t.Metadata.Name + " to be ready"
			}
		}
		return
	}
	if len(v.olds) > 0 {
		sp.done = false
		// Replace the ready one (the newest if several); the others take
		// nothing away by stopping.
		keep := v.olds[len(v.olds)-1]
		for _, e := range v.olds {
			if e.isReady() {
				keep = e
			}
		}
		for _, e := range v.olds {
			if e != keep {
				p.stop(e, "superseded")
			}
		}
		p.replaceOld(o, sp, s, keep, mayStart)
		return
	}
	if len(v.stopping) > 0 || !mayStart {
		sp.done = false
		return // stop-first: the new task waits for the old one to stop
	}
	last := s.lastTerminal()
	at, ok, failures := p.replaceAt(o, sp, s, last)
	if !ok {
		return // left empty (restart condition, unstartable): it holds no update back
	}
	sp.done = false
	if at.After(p.now) {
		p.wake(at)
		return
	}
	if !p.imagesReady(o) {
		return // the resolver's write wakes the next pass
	}
	if why := p.overTaskQuota(o.key.ns); why != "" {
		o.messages = append(o.messages, why)
		return
	}
	if !p.mayCreate(o) {
		return
	}
	e := p.newTask(o, s)
	withFailures(e, failures)
	p.placeTask(e)
}

// slotDone notes whether a slot with a current task holds the update back.
func (p *planner) slotDone(sp *svcPass, v slotView) {
	t := v.cur.t
	if len(v.olds) > 0 || len(v.stopping) > 0 || !v.cur.isReady() || t.Status.Started == nil {
		sp.done = false
		return
	}
	if at := t.Status.Started.Add(sp.monitor); at.After(p.now) {
		sp.done = false
		if u := sp.status.Update; u != nil && (u.State == legion.UpdateUpdating || u.State == legion.UpdateRollingBack) {
			p.wake(at)
		}
	}
}

// evictNoExecute stops at once the slot's tasks on nodes with a NoExecute
// taint the owner does not tolerate.
func (p *planner) evictNoExecute(o *owner, s *slot) bool {
	evicted := false
	for _, e := range s.entries {
		if e.node < 0 || !p.nodes[e.node].noExecute || !e.live() || !e.run {
			continue
		}
		if taint, bad := untolerated(p.nodes[e.node].n, o.placement.Tolerations, legion.NoExecute); bad {
			p.stop(e, "evicted by taint "+taint.String())
			evicted = true
		}
	}
	return evicted
}

// stopForbiddenUnstarted stops the slot's tasks placed but not started
// whose pod their namespace's security allow-list, tightened since their
// spec was admitted, no longer lets start; the slot's next task waits
// pending, saying why. Tasks that started run on.
func (p *planner) stopForbiddenUnstarted(s *slot) bool {
	stopped := false
	for _, e := range s.entries {
		if msg := p.forbiddenUnstarted(e); msg != "" {
			p.stop(e, "not started: "+msg)
			stopped = true
		}
	}
	return stopped
}

// forbiddenUnstarted says why a live task, placed but not started yet,
// may not start in its namespace now, or "".
func (p *planner) forbiddenUnstarted(e *entry) string {
	t := e.t
	if !e.live() || !e.run || t.Spec.Placed == nil || t.Status.Started != nil {
		return ""
	}
	switch stateOf(t) {
	case legion.TaskAssigned, legion.TaskAccepted, legion.TaskPreparing:
		return p.securityMessage(t)
	}
	return ""
}

// replaceOld replaces a slot's outdated or moving task: stop-first when
// the order and the disruption budget allow, else start-first (the old
// task stops once the new one is ready).
func (p *planner) replaceOld(o *owner, sp *svcPass, s *slot, old *entry, mayStart bool) {
	leave := p.leaveReason(old)
	moving := leave != ""
	if moving && p.volumeLeave(old) != "" {
		// Its Volume cannot be in two places: the task stops first,
		// whatever the order and the budget, and its next one waits for
		// the move.
		p.stop(old, leave)
		return
	}
	if !moving {
		if sp.paused {
			return
		}
		if !p.imagesReady(o) {
			return // an update waits, old tasks running, for the new pod's digests
		}
		if sp.budget <= 0 {
			return
		}
		sp.budget--
	}
	wasReady := old.isReady()
	budgetAllows := sp.maxUnavail < 0 || !wasReady || sp.unavailable < sp.maxUnavail
	startFirst := (sp.startFirst || !budgetAllows) && !sp.stopOnly
	if sp.stopOnly && !budgetAllows {
		old.drainReason = "held by the disruption budget (maxUnavailable " + strconv.Itoa(sp.maxUnavail) + ")"
		if !moving {
			sp.budget++
		}
		return
	}
	if !startFirst {
		if wasReady {
			sp.unavailable++
		}
		msg := "updated"
		if moving {
			msg = leave
		}
		p.stop(old, msg)
		return
	}
	if !mayStart {
		return
	}
	if !p.imagesReady(o) {
		old.drainReason = "waiting for its replacement's image digests"
		return
	}
	if !p.mayCreate(o) {
		old.drainReason = "waiting for its replacement to be made (at most " + strconv.Itoa(MaxCreatesPerPass) + " tasks per pass)"
		return
	}
	old.drainReason = "waiting for its replacement to be ready"
	e := p.newTask(o, s)
	if p.placeTask(e) {
		old.drainReason = "waiting for its replacement " + e.t.Metadata.Name + " to be ready"
	}
}

// replaceAt says whether and when an empty slot gets a new task, after its
// last task: at once after shutdown or orphaned, with backoff after a
// failure (unless the restart condition is none), after complete only
// with condition any. It also returns the failures in a row behind it.
func (p *planner) replaceAt(o *owner, sp *svcPass, s *slot, last *entry) (time.Time, bool, int) {
	if last == nil {
		return p.now, true, 0
	}
	t := last.t
	rp := o.pod.RestartPolicy
	cond, base := legion.RestartAny, time.Second
	if rp != nil {
		cond, base = rp.Condition, max(rp.Delay.D(), time.Second)
	}
	switch stateOf(t) {
	case legion.TaskShutdown, legion.TaskOrphaned:
		return p.now, true, 0
	case legion.TaskComplete:
		if o.pod.KeepsCompleted() {
			return time.Time{}, false, 0
		}
		return ended(t).Add(base), true, 0
	}
	// Failed or rejected.
	if t.Spec.PodHash != o.hash {
		if sp.badHash != "" && t.Spec.PodHash == sp.badHash {
			return p.now, true, 0 // refilled with the pod the rollback left
		}
		if cond == legion.RestartNone {
			return time.Time{}, false, 0
		}
		return p.now, true, 0
	}
	if t.Status.Permanent {
		msg := "task " + t.Metadata.Name + " failed as unstartable"
		if t.Status.Message != "" {
			msg += " (" + t.Status.Message + ")"
		}
		o.messages = append(o.messages, msg+": not started again until the spec changes")
		return time.Time{}, false, 0
	}
	if cond == legion.RestartNone {
		return time.Time{}, false, 0
	}
	failures := failuresInRow(s)
	if msg := failedStarts(s); msg != "" {
		o.messages = append(o.messages, msg)
	}
	if t.Status.WrongPlatform != nil {
		return p.now, true, failures // it avoids that platform now
	}
	return ended(t).Add(backoff(base, failures, MaxRestartDelay)), true, failures
}

// failedStarts says so when a slot's last three tasks failed to start,
// naming the nodes they were on: several say it is not a node's doing;
// one (a cluster of one node, or the only node the pod may run on) is
// where to look.
func failedStarts(s *slot) string {
	var nodes []string
	var last *legion.Task
	failed := 0
	for i := len(s.entries) - 1; i >= 0 && failed < FailedStartsInRow; i-- {
		t := s.entries[i].t
		if live(t) {
			continue
		}
		st := stateOf(t)
		if (st != legion.TaskFailed && st != legion.TaskRejected) || t.Status.Started != nil || t.Spec.Node == "" {
			return ""
		}
		if last == nil {
			last = t
		}
		failed++
		if !slices.Contains(nodes, t.Spec.Node) {
			nodes = append(nodes, t.Spec.Node)
		}
	}
	if failed < FailedStartsInRow {
		return ""
	}
	slices.Sort(nodes)
	on := "on node "
	if len(nodes) > 1 {
		on = "on nodes "
	}
	msg := "slot " + strconv.Itoa(last.Spec.Slot) + " failed to start " + strconv.Itoa(FailedStartsInRow) +
		" times in a row, " + on + strings.Join(nodes, ", ")
	if last.Status.Message != "" {
		msg += ": " + last.Status.Message
	}
	return msg
}

// pruneHistory keeps the last HistoryPerSlot terminal tasks of each slot,
// each replaced one told to shut down.
func (p *planner) pruneHistory(o *owner) {
	o.eachSlot(func(s *slot) {
		p.shutReplaced(s)
		kept := 0
		for i := len(s.entries) - 1; i >= 0; i-- {
			e := s.entries[i]
			if e.deleted || e.live() {
				continue
			}
			kept++
			if kept > HistoryPerSlot {
				p.remove(e)
			}
		}
	})
}

// shutReplaced tells each ended task of the slot that a later task
// replaced to shut down: nothing will run it again, so its desired state
// says so (a failed task's history reads "shutdown, failed", as Swarm's
// does), not "running". The agents take no action on a task that ended.
func (p *planner) shutReplaced(s *slot) {
	later := false
	for i := len(s.entries) - 1; i >= 0; i-- {
		e := s.entries[i]
		if e.deleted {
			continue
		}
		if later && !e.live() && e.run {
			p.endedShutdown(e)
		}
		later = true
	}
}

// endedShutdown sets an ended task's desired state to shutdown; its
// status stays as the agent or the planner left it.
func (p *planner) endedShutdown(e *entry) {
	p.mut(e).Spec.DesiredState = legion.TaskShutdown
	e.run = false
}

// ownerGone stops the tasks of a deleted Service or Job, then deletes
// them.
func (p *planner) ownerGone(o *owner) {
	for _, e := range o.all {
		if e.live() {
			p.stop(e, strings.ToLower(string(o.key.kind))+" "+o.key.name+" is gone")
		}
		if !e.live() {
			p.remove(e)
		}
	}
}

// serviceStatus writes the service's counts, update state and messages.
func (p *planner) serviceStatus(o *owner, sp *svcPass) {
	st := &sp.status
	st.ObservedGeneration = o.gen
	st.Replicas = sp.wanted
	st.Running, st.Ready, st.Complete = 0, 0, 0
	stays := o.pod.KeepsCompleted() // a completed task's slot is done
	var unheard map[string]int      // ready tasks of suspect nodes, by node
	for _, e := range o.all {
		if stays && !e.deleted && e.st == legion.TaskComplete && e.run {
			st.Complete++
		}
		if e.deleted || e.st != legion.TaskRunning || !e.run {
			continue
		}
		st.Running++
		switch {
		case !e.ready:
		case e.node >= 0 && !p.nodes[e.node].state.InEndpoints():
			// Out of the endpoints (the dispatcher leaves them out), so
			// not counted ready, as Kubernetes marks a pod of an
			// unreachable node not ready.
			if unheard == nil {
				unheard = map[string]int{}
			}
			unheard[e.t.Spec.Node]++
		default:
			st.Ready++
		}
	}
	for _, node := range slices.Sorted(maps.Keys(unheard)) {
		n := unheard[node]
		o.messages = append(o.messages, fmt.Sprintf("%s on node %s, suspect (its heartbeats stopped), out of the endpoints until it is heard from",
			counted(n, "ready task"), node))
	}
	if u := st.Update; u != nil && sp.done && (u.State == legion.UpdateUpdating || u.State == legion.UpdateRollingBack) {
		nu := *u
		now := p.now
		nu.Completed = &now
		nu.Message = ""
		if u.State == legion.UpdateUpdating {
			nu.State = legion.UpdateCompleted
		} else {
			nu.State = legion.UpdateRolledBack
		}
		st.Update = &nu
	}
	slices.Sort(o.messages)
	st.Message = strings.Join(slices.Compact(o.messages), "; ")
	if !reflect.DeepEqual(*st, o.svc.Status) {
		out := *o.svc
		out.Status = *st
		p.svcOut[o.svc] = &out
	}
}
