package legion

import "time"

// EventType says whether an event is routine or needs an operator's eye.
type EventType string

// Event types.
const (
	EventNormal  EventType = "Normal"
	EventWarning EventType = "Warning"
)

// Event reasons: one CamelCase word each, as `legion events` prints them.
const (
	ReasonScheduled          = "Scheduled"
	ReasonUnschedulable      = "Unschedulable"
	ReasonTaskStarted        = "TaskStarted"
	ReasonTaskCompleted      = "TaskCompleted"
	ReasonTaskFailed         = "TaskFailed"
	ReasonTaskRejected       = "TaskRejected"
	ReasonTaskStopped        = "TaskStopped"
	ReasonTaskOrphaned       = "TaskOrphaned"
	ReasonBackOff            = "BackOff"
	ReasonProbeFailed        = "ProbeFailed"
	ReasonImagePullFailed    = "ImagePullFailed"
	ReasonWrongPlatform      = "WrongPlatform"
	ReasonNodeJoined         = "NodeJoined"
	ReasonNodeReady          = "NodeReady"
	ReasonNodeSuspect        = "NodeSuspect"
	ReasonNodeDown           = "NodeDown"
	ReasonNodeRemoved        = "NodeRemoved"
	ReasonNodeDraining       = "NodeDraining"
	ReasonNodeDrained        = "NodeDrained"
	ReasonDrainBlocked       = "DrainBlocked"
	ReasonNodePaused         = "NodePaused"
	ReasonNodeActive         = "NodeActive"
	ReasonMemoryPressure     = "MemoryPressure"
	ReasonMemoryPressureOver = "MemoryPressureOver"
	ReasonUpdateStarted      = "UpdateStarted"
	ReasonUpdatePaused       = "UpdatePaused"
	ReasonUpdateRollingBack  = "UpdateRollingBack"
	ReasonUpdateRolledBack   = "UpdateRolledBack"
	ReasonRollbackPaused     = "UpdateRollbackPaused"
	ReasonUpdateCompleted    = "UpdateCompleted"
	ReasonScaled             = "Scaled"
	ReasonQuotaRefused       = "QuotaRefused"
	ReasonImageResolveFailed = "ImageResolveFailed"
	ReasonJobStarted         = "JobStarted"
	ReasonJobSucceeded       = "JobSucceeded"
	ReasonJobFailed          = "JobFailed"
	ReasonJobCreated         = "JobCreated"
	ReasonRunSkipped         = "RunSkipped"
	ReasonVolumeMoving       = "VolumeMoving"
	ReasonVolumeMoved        = "VolumeMoved"
	ReasonPortNotPublished   = "PortNotPublished"
	ReasonPortPublished      = "PortPublished"
)

// ObjectRef names the object an event is about.
type ObjectRef struct {
	Kind      Kind   `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// UID tells the object from one of the same name deleted before it
	// (empty from managers that did not send it).
	UID string `json:"uid,omitempty"`
}

// String is Kind/name or Kind/namespace/name.
func (r ObjectRef) String() string {
	if r.Namespace == "" {
		return string(r.Kind) + "/" + r.Name
	}
	return string(r.Kind) + "/" + r.Namespace + "/" + r.Name
}

// Event is something that happened to an object, derived by each manager
// from the changes it applies. Events are not stored objects: a manager
// keeps the recent ones in memory only.
type Event struct {
	// Sequence orders events; a follow resumes after the last it saw. A
	// repeat of the last event on an object takes a new sequence.
	Sequence uint64    `json:"sequence"`
	Time     time.Time `json:"time"`           // last seen
	First    time.Time `json:"first,omitzero"` // first seen, when Count > 1
	Type     EventType `json:"type"`
	Reason   string    `json:"reason"`
	Object   ObjectRef `json:"object"`
	Message  string    `json:"message,omitempty"`
	Count    int       `json:"count"` // how many times in a row it happened
}
