package legion

import (
	"fmt"
	"strings"
	"time"
)

// Task is one run of a pod on one node, made by the planner for a slot of
// a Service or Job. Users read tasks but never write them.
type Task struct {
	Header
	Spec   TaskSpec   `json:"spec"`
	Status TaskStatus `json:"status,omitzero"`
}

// Owner names the Service or Job a task belongs to.
type Owner struct {
	Kind Kind   `json:"kind"`
	Name string `json:"name"`
}

// TaskSpec is what the planner decided.
type TaskSpec struct {
	Owner           Owner             `json:"owner"`
	Slot            int               `json:"slot"`               // replicated: 1..n; stateful: ordinal from 0; global: 0
	Node            string            `json:"node,omitempty"`     // assigned node; a global task names it from the start
	DesiredState    TaskState         `json:"desiredState"`       // running, shutdown or complete
	Pod             PodSpec           `json:"pod"`                // as written in the owner's spec
	Images          map[string]string `json:"images,omitempty"`   // image reference -> digest it runs
	OwnerGeneration uint64            `json:"ownerGeneration"`    // the owner's generation it was made from
	PodHash         string            `json:"podHash,omitempty"`  // hash of Pod, to find outdated tasks
	Job             bool              `json:"job,omitempty"`      // a Job's task: no endpoints
	Hostname        string            `json:"hostname,omitempty"` // stateful: <service>-<n>
	Volumes         map[string]string `json:"volumes,omitempty"`  // pod volume -> Volume object, claims resolved
	Placed          *time.Time        `json:"placed,omitempty"`   // when assigned to Node
	// StopReason is why the planner told the task to stop (desiredState
	// no longer running): scaled down, replaced by an update's task,
	// evicted by a taint, moved off a draining node. The agent's status
	// says only that it stopped.
	StopReason string `json:"stopReason,omitempty"`
	// Snapshot: a stateful update's task snapshots its claimed Volumes
	// before it starts, or its rollback's task rolls them back (4.3).
	Snapshot *TaskSnapshot `json:"snapshot,omitempty"`
}

// TaskSnapshot says what the agent does to a task's claimed Volumes before
// the task starts.
type TaskSnapshot struct {
	// Name is the snapshot, legion-update-<generation>.
	Name string `json:"name"`
	// Restore rolls each claimed Volume back to Name and drops it; without
	// it the agent takes Name unless it exists, dropping older
	// legion-update-* snapshots.
	Restore bool `json:"restore,omitempty"`
}

// TaskState is where a task stands (7.1's state machine).
type TaskState string

// Task states.
const (
	TaskPending   TaskState = "pending"
	TaskAssigned  TaskState = "assigned"
	TaskAccepted  TaskState = "accepted"
	TaskPreparing TaskState = "preparing"
	TaskStarting  TaskState = "starting"
	TaskRunning   TaskState = "running"
	TaskComplete  TaskState = "complete"
	TaskFailed    TaskState = "failed"
	TaskRejected  TaskState = "rejected"
	TaskShutdown  TaskState = "shutdown"
	TaskOrphaned  TaskState = "orphaned"
)

var taskStateOrder = map[TaskState]int{
	TaskPending: 0, TaskAssigned: 1, TaskAccepted: 2, TaskPreparing: 3, TaskStarting: 4, TaskRunning: 5,
	TaskComplete: 6, TaskFailed: 6, TaskRejected: 6, TaskShutdown: 6, TaskOrphaned: 6,
}

// Terminal reports whether the task will not run again.
func (s TaskState) Terminal() bool {
	switch s {
	case TaskComplete, TaskFailed, TaskRejected, TaskShutdown, TaskOrphaned:
		return true
	}
	return false
}

// Valid reports whether s is a task state.
func (s TaskState) Valid() bool { _, ok := taskStateOrder[s]; return ok }

// CanTransition reports whether a task may go from one state to another.
// Tasks only move forward: pending, assigned, accepted, preparing,
// starting, running, then complete. Failure and rejection end a task from
// any state up to running (rejection only before it runs); any live state
// may be shut down, and a lost node orphans any live task. Terminal states
// are final.
func CanTransition(from, to TaskState) bool {
	if !from.Valid() || !to.Valid() || from.Terminal() || from == to {
		return false
	}
	switch to {
	case TaskShutdown, TaskOrphaned, TaskFailed:
		return true
	case TaskRejected:
		return taskStateOrder[from] <= taskStateOrder[TaskPreparing]
	case TaskComplete:
		return from == TaskRunning || from == TaskStarting
	}
	return taskStateOrder[to] > taskStateOrder[from]
}

// OfOrdinal reports whether t is a task of the stateful ordinal whose
// stable name is name (<service>-<n>, its hostname and DNS name), as
// sessions and logs take it.
func (t *Task) OfOrdinal(name string) bool {
	return t.Spec.Hostname == name && t.Spec.Owner.Kind == KindService
}

// Message is what its status says, and why the planner told it to stop
// when it did: "stopped (evicted by taint dedicated=db:NoExecute)".
func (t *Task) Message() string {
	msg, why := t.Status.Message, t.Spec.StopReason
	switch {
	case why == "" || t.Spec.DesiredState == TaskRunning || strings.Contains(msg, why):
		return msg
	case msg == "":
		return why
	}
	return msg + " (" + why + ")"
}

// Transition checks and records a state change.
func (t *Task) Transition(to TaskState, now time.Time, msg string) error {
	from := t.Status.State
	if from == "" {
		from = TaskPending
	}
	if !CanTransition(from, to) {
		return fmt.Errorf("task %s: cannot go from %s to %s", t.Metadata.Name, from, to)
	}
	t.Status.State, t.Status.Message = to, msg
	t.Status.Timestamp = now
	if to.Terminal() {
		t.Status.Ready = false
	}
	return nil
}

// TaskStatus is what the agent (and, for pending tasks, the planner) says.
type TaskStatus struct {
	State         TaskState         `json:"state,omitempty"`
	Message       string            `json:"message,omitempty"`
	Timestamp     time.Time         `json:"timestamp,omitzero"`
	Ready         bool              `json:"ready,omitempty"` // a running task's readiness
	IP            string            `json:"ip,omitempty"`
	Started       *time.Time        `json:"started,omitempty"`
	Finished      *time.Time        `json:"finished,omitempty"`
	ExitCode      *int              `json:"exitCode,omitempty"`
	Restarts      int               `json:"restarts,omitempty"`
	Permanent     bool              `json:"permanent,omitempty"` // failed as unstartable: no retry until the spec changes
	WrongPlatform *Platform         `json:"wrongPlatform,omitempty"`
	PodJail       string            `json:"podJail,omitempty"`
	Manifests     map[string]string `json:"manifests,omitempty"` // image -> manifest digest the node ran
	Containers    []ContainerStatus `json:"containers,omitempty"`
}

// ContainerStatus is one container of a running task.
type ContainerStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"` // waiting, running, exited
	Ready    bool   `json:"ready,omitempty"`
	Restarts int    `json:"restarts,omitempty"`
	ExitCode *int   `json:"exitCode,omitempty"`
	Message  string `json:"message,omitempty"`
}
