package scheduler

import "github.com/legionbsd/legion"

// dependsMessage says what a service's task waits for among its
// spec.dependsOn, or "" when it may be placed. Only a service's first
// deploy waits: once one of its tasks has started, later tasks
// (replacements, updates, scaling) go ahead whatever the dependencies do.
// A dependency no Service (or, for completed, Job) of the namespace has
// is waited for too, with a message saying so: a stack's objects may land
// in any order.
func (p *planner) dependsMessage(o *owner) string {
	if o.svc == nil || len(o.svc.Spec.DependsOn) == 0 || hasRun(o) {
		return ""
	}
	ns := o.key.ns
	for _, d := range o.svc.Spec.DependsOn {
		dep := p.owners[ownerKey{legion.KindService, ns, d.Service}]
		if (dep == nil || dep.svc == nil) && d.Condition == legion.DependCompleted {
			dep = p.owners[ownerKey{legion.KindJob, ns, d.Service}]
		}
		if dep == nil || (dep.svc == nil && dep.job == nil) {
			return "waiting for " + d.Service + ": no service " + d.Service + " in namespace " + ns + " yet"
		}
		if !dependencyHolds(dep, d.Condition) {
			return "waiting for " + d.Service + " " + conditionText[d.Condition]
		}
	}
	return ""
}

// conditionText ends a waiting message for each condition.
var conditionText = map[legion.DependencyCondition]string{
	legion.DependStarted:   "to start",
	legion.DependReady:     "to be ready",
	legion.DependCompleted: "to complete successfully",
}

// hasRun reports whether one of the service's tasks has ever started.
func hasRun(o *owner) bool {
	if o.svc.Status.Running > 0 {
		return true
	}
	for _, e := range o.all {
		if e.t.Status.Started != nil {
			return true
		}
	}
	return false
}

// dependencyHolds reports whether one of dep's tasks meets the condition:
// running (or already done successfully) for started, running and ready
// for ready, exited successfully for completed.
func dependencyHolds(dep *owner, c legion.DependencyCondition) bool {
	for _, e := range dep.all {
		switch c {
		case legion.DependReady:
			if e.isReady() {
				return true
			}
		case legion.DependCompleted:
			if e.st == legion.TaskComplete {
				return true
			}
		default:
			if e.st == legion.TaskRunning || e.st == legion.TaskComplete {
				return true
			}
		}
	}
	return false
}
