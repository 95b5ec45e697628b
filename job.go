package legion

import (
	"strconv"
	"time"
)

// Job runs a pod to completion: replicated (completion slots, a few at a
// time) or global (one slot per eligible node).
type Job struct {
	Header
	Spec   JobSpec   `json:"spec"`
	Status JobStatus `json:"status,omitzero"`
}

// JobMode is how a job's completion slots are made.
type JobMode string

// Job modes.
const (
	JobReplicated JobMode = "replicated"
	JobGlobal     JobMode = "global"
)

// JobSpec is what the user asks of a job.
type JobSpec struct {
	Mode           JobMode   `json:"mode"`
	Completions    int       `json:"completions,omitempty"` // replicated: slots that must complete (default 1)
	Parallelism    int       `json:"parallelism,omitempty"` // replicated: slots running at once (default 1)
	BackoffLimit   *int      `json:"backoffLimit"`          // failures tolerated, failed tasks and running tasks' restarts (default 6)
	ActiveDeadline *Duration `json:"activeDeadline,omitempty"`
	Pod            PodSpec   `json:"pod"`
	Placement      Placement `json:"placement"`
}

// JobState is where a job stands.
type JobState string

// Job states.
const (
	JobRunning  JobState = "running"
	JobComplete JobState = "complete"
	JobFailed   JobState = "failed"
)

// Over reports whether a job in state s is done: it starts no more tasks.
func (s JobState) Over() bool { return s == JobComplete || s == JobFailed }

// JobStatus is what the controller says about a job.
type JobStatus struct {
	State     JobState      `json:"state,omitempty"`
	Started   *time.Time    `json:"started,omitempty"`
	Finished  *time.Time    `json:"finished,omitempty"`
	Active    int           `json:"active,omitempty"`
	Succeeded int           `json:"succeeded,omitempty"`
	Failed    int           `json:"failed,omitempty"`
	Message   string        `json:"message,omitempty"`
	Images    *ImagesStatus `json:"images,omitempty"`
}

// CronJob makes a Job on a five-field UTC cron schedule.
type CronJob struct {
	Header
	Spec   CronJobSpec   `json:"spec"`
	Status CronJobStatus `json:"status,omitzero"`
}

// ConcurrencyPolicy is what a due run does while an earlier Job runs.
type ConcurrencyPolicy string

// Concurrency policies.
const (
	ConcurrencyAllow   ConcurrencyPolicy = "allow"
	ConcurrencyForbid  ConcurrencyPolicy = "forbid"
	ConcurrencyReplace ConcurrencyPolicy = "replace"
)

// CronJobSpec is what the user asks of a cron job.
type CronJobSpec struct {
	Schedule                   string            `json:"schedule"`
	Suspend                    bool              `json:"suspend"`
	StartingDeadline           *Duration         `json:"startingDeadline,omitempty"`
	ConcurrencyPolicy          ConcurrencyPolicy `json:"concurrencyPolicy"`
	SuccessfulJobsHistoryLimit *int              `json:"successfulJobsHistoryLimit"` // default 3
	FailedJobsHistoryLimit     *int              `json:"failedJobsHistoryLimit"`     // default 1
	Job                        JobSpec           `json:"job"`
}

// CronJobStatus is what the controller says about a cron job.
type CronJobStatus struct {
	// LastSchedule is the time of the latest run that fell due (run or
	// skipped); unset until one has.
	LastSchedule *time.Time `json:"lastSchedule,omitempty"`
	// CountedFrom is when the controller first saw the cron job: runs due
	// before it are not owed.
	CountedFrom *time.Time `json:"countedFrom,omitempty"`
	Active      []string   `json:"active,omitempty"`
	Message     string     `json:"message,omitempty"`
}

// MaxCronJobName leaves room in a Job's 63-character name for the
// "-<minutes since the epoch>" suffix.
const MaxCronJobName = 52

// CronJobRunName is the name of the Job a CronJob makes for its run due
// at due: the CronJob's name and the run's minute since the epoch.
func CronJobRunName(cronJob string, due time.Time) string {
	return cronJob + "-" + strconv.FormatInt(due.Unix()/60, 10)
}

// CronJobSkipped starts a CronJob's status message for a run that fell
// due and was skipped (suspended, late, or a Job of it still running
// under concurrencyPolicy forbid), as the planner writes it and events
// read it.
const CronJobSkipped = "skipped the run of "
