package scheduler

import (
	"time"

	"github.com/legionbsd/legion"
)

// State is the planner's input: a snapshot of the store plus what the
// leader keeps in memory (heartbeats, usage reports, when it took over).
// Plan never changes anything it is given; the slices may be in any order.
type State struct {
	Services   []*legion.Service
	Jobs       []*legion.Job
	CronJobs   []*legion.CronJob
	Tasks      []*legion.Task
	Nodes      []*legion.Node
	Volumes    []*legion.Volume
	Namespaces []*legion.Namespace
	// ImagePolicies: with one that enforces, every pod waits for the
	// leader's check of its images, those its nodes never pull included.
	ImagePolicies []*legion.ImagePolicy
	// Objects is how many objects (legion.ObjectQuotaKinds) each
	// namespace with an objects quota holds, for its status.used.
	Objects map[string]int

	// Heartbeats is the last heartbeat this leader received from each
	// node, by node name. A node missing from it has not been heard from
	// since LeaderSince.
	Heartbeats map[string]time.Time
	// LeaderSince is when this manager became leader: node health waits
	// eight heartbeat periods after it before marking a node down, and the
	// autoscaler waits downDelay before shrinking.
	LeaderSince time.Time
	// Usage is the recent use reported in heartbeats, one per running
	// task; reports older than UsageWindow are ignored.
	Usage []legion.Usage
}

// Result is the writes that converge the snapshot, each a whole object as
// it should be stored (the metadata's version is the write's precondition),
// sorted by namespace and name, and when the planner must run again. The
// objects share maps, slices and pointers with the snapshot and with each
// other (a pod spec, a labels map, the placement time): treat them as read
// only, as the store does when it encodes them.
type Result struct {
	CreateTasks []*legion.Task
	UpdateTasks []*legion.Task
	DeleteTasks []*legion.Task

	// UpdateServices carries status writes, and the spec written back by
	// an automatic rollback.
	UpdateServices []*legion.Service

	CreateJobs []*legion.Job // by cron jobs
	UpdateJobs []*legion.Job // status
	DeleteJobs []*legion.Job // cron job history, replace, deleted cron jobs

	UpdateCronJobs []*legion.CronJob
	UpdateNodes    []*legion.Node // state and drain status

	CreateVolumes []*legion.Volume // stateful claims
	UpdateVolumes []*legion.Volume // claims resized

	UpdateNamespaces []*legion.Namespace // status.used

	// NextWake is the earliest time something is due (a backoff, an update
	// delay or monitor window, a cron run, a heartbeat deadline); zero when
	// nothing is.
	NextWake time.Time
}

// Empty reports whether the result holds no write.
func (r *Result) Empty() bool {
	return len(r.CreateTasks)+len(r.UpdateTasks)+len(r.DeleteTasks)+len(r.UpdateServices)+
		len(r.CreateJobs)+len(r.UpdateJobs)+len(r.DeleteJobs)+len(r.UpdateCronJobs)+
		len(r.UpdateNodes)+len(r.CreateVolumes)+len(r.UpdateVolumes)+len(r.UpdateNamespaces) == 0
}

// Timing the planner follows (3.3, 3.3.1, 4.2).
const (
	SuspectAfter      = 3 // missed heartbeats
	DownAfter         = 8 // missed heartbeats
	MaxRestartDelay   = 60 * time.Second
	JobRetryDelay     = 10 * time.Second
	HistoryPerSlot    = 5
	UsageWindow       = time.Minute
	FailedStartsInRow = 3
)

// Labels the planner puts on what it makes.
const (
	LabelService = "legion.service"
	LabelJob     = "legion.job"
	LabelCronJob = "legion.cronjob"
	// LabelFailures on a task counts the failed tasks in a row before it in
	// its slot, so the restart backoff keeps doubling past the history kept.
	LabelFailures = "legion.failures"
)
