package scheduler_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

const cronYAML = `
apiVersion: legion/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "*/5 * * * *"
  EXTRA
  job: {pod: {containers: [{name: c, image: n:1}]}}
`

func cronSpec(extra string) string { return strings.Replace(cronYAML, "EXTRA", extra, 1) }

// longJobsCron is a one-node cluster with the nightly cron job (extra
// added to its spec), whose jobs run for an hour, planned once.
func longJobsCron(t *testing.T, extra string) *schedtest.Cluster {
	t.Helper()
	c := withJobRunTime(t, 1, time.Hour)
	c.Apply(cronSpec(extra))
	c.Plan()
	return c
}

// nextRun moves the clock on to the cron job's next five-minute run and
// lets the cluster settle.
func nextRun(c *schedtest.Cluster) {
	c.Advance(5 * time.Minute)
	c.Converge()
}

func cronJobNames(c *schedtest.Cluster) []string {
	var out []string
	for _, j := range c.Jobs {
		if j.Metadata.Labels["legion.cronjob"] == "nightly" {
			out = append(out, j.Metadata.Name)
		}
	}
	return sortStrings(out)
}

func minutes(t time.Time) string { return strconv.FormatInt(t.Unix()/60, 10) }

func TestCronJobFirstSightOwesNothingThenRunsOnSchedule(t *testing.T) {
	t.Parallel()
	c := schedtest.New(t) // no nodes: their heartbeat deadlines would wake it sooner
	c.Apply(cronSpec(""))
	r := c.Plan()
	cj := c.CronJobs["default/nightly"]
	if cj.Status.LastSchedule != nil || cj.Status.CountedFrom == nil || !cj.Status.CountedFrom.Equal(c.Now) || len(r.CreateJobs) != 0 {
		t.Fatalf("first sight: lastSchedule %v (want none: nothing ran), countedFrom %v (want now), jobs %d",
			cj.Status.LastSchedule, cj.Status.CountedFrom, len(r.CreateJobs))
	}
	if want := c.Now.Add(5 * time.Minute); !r.NextWake.Equal(want) {
		t.Fatalf("next wake %s, want the next run %s", r.NextWake, want)
	}
	nextRun(c)
	want := "nightly-" + minutes(c.Now)
	if got := cronJobNames(c); !cmp.Equal(got, []string{want}) {
		t.Fatalf("jobs %v, want [%s]", got, want)
	}
	cj = c.CronJobs["default/nightly"]
	if !cmp.Equal(cj.Status.Active, []string{want}) {
		t.Fatalf("active %v", cj.Status.Active)
	}
	if cj.Status.LastSchedule == nil || !cj.Status.LastSchedule.Equal(c.Now) {
		t.Fatalf("after the first run: lastSchedule %v, want %s", cj.Status.LastSchedule, c.Now)
	}
}

func TestCronJobCatchingUpAfterDowntimeOwesOneRun(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 1)
	c.Apply(cronSpec(""))
	c.Plan()
	c.Advance(3*time.Hour + 2*time.Minute)
	c.Plan()
	latest := c.Now.Truncate(5 * time.Minute)
	if got := cronJobNames(c); !cmp.Equal(got, []string{"nightly-" + minutes(latest)}) {
		t.Fatalf("after 3h away: jobs %v, want only the latest run", got)
	}
	if ls := c.CronJobs["default/nightly"].Status.LastSchedule; !ls.Equal(latest) {
		t.Fatalf("lastSchedule %s, want %s", ls, latest)
	}
}

func TestCronJobSkips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, extra, want string
		running           bool
	}{
		{"suspended", "suspend: true", "suspended", false},
		{"too late", "startingDeadline: 30s", "late, more than its startingDeadline of 30s", false},
		{"forbid", "concurrencyPolicy: forbid", "still runs", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := longJobsCron(t, strings.Replace(tc.extra, "startingDeadline: 30s", "", 1))
			if tc.running {
				nextRun(c)
			}
			c.Apply(cronSpec(tc.extra))
			c.Advance(5*time.Minute + time.Minute)
			c.Plan()
			cj := c.CronJobs["default/nightly"]
			if !strings.Contains(cj.Status.Message, tc.want) || !strings.HasPrefix(cj.Status.Message, "skipped the run of ") {
				t.Fatalf("message %q, want it to say %q", cj.Status.Message, tc.want)
			}
			wantJobs := 0
			if tc.running {
				wantJobs = 1
			}
			if n := len(cronJobNames(c)); n != wantJobs {
				t.Fatalf("%d jobs, want %d", n, wantJobs)
			}
		})
	}
}

func TestCronJobReplaceDeletesTheRunningJob(t *testing.T) {
	t.Parallel()
	c := longJobsCron(t, "concurrencyPolicy: replace")
	nextRun(c)
	first := cronJobNames(c)
	nextRun(c)
	got := cronJobNames(c)
	if len(got) != 1 || cmp.Equal(got, first) {
		t.Fatalf("replace: jobs %v then %v", first, got)
	}
	// The replaced job's tasks are stopped and removed.
	if n := len(c.OwnerTasks(first[0])); n != 0 {
		t.Fatalf("%d tasks of the replaced job left", n)
	}
}

func TestCronJobHistoryLimitsAndDeletion(t *testing.T) {
	t.Parallel()
	c := withJobRunTime(t, 1, 0)
	c.Apply(cronSpec(""))
	c.Plan()
	for i := 0; i < 6; i++ {
		nextRun(c)
		c.Advance(time.Second)
		c.Converge()
	}
	if n := len(cronJobNames(c)); n != 3 {
		t.Fatalf("%d finished jobs kept, want successfulJobsHistoryLimit 3: %v", n, cronJobNames(c))
	}
	for _, name := range cronJobNames(c) {
		if c.Job(name).Status.State != legion.JobComplete {
			t.Fatalf("job %s %s", name, c.Job(name).Status.State)
		}
	}
	c.Apply(strings.Replace(cronSpec(""), "job: {pod:", "job: {backoffLimit: 0, pod:", 1))
	for i := 0; i < 3; i++ {
		c.Advance(5 * time.Minute)
		c.FailJobs["nightly-"+minutes(c.Now.Truncate(5*time.Minute))] = true
		c.Converge()
		c.Run(2 * time.Minute)
	}
	failed := 0
	for _, name := range cronJobNames(c) {
		if c.Job(name).Status.State == legion.JobFailed {
			failed++
		}
	}
	if failed != 1 || len(cronJobNames(c)) != 4 {
		t.Fatalf("%d failed jobs kept of %v, want failedJobsHistoryLimit 1 beside 3 complete", failed, cronJobNames(c))
	}
	c.DeleteCronJob("nightly")
	c.Converge()
	if n := len(cronJobNames(c)); n != 0 {
		t.Fatalf("deleting the cron job left %d jobs", n)
	}
}

func TestCronJobAllowRunsAlongside(t *testing.T) {
	t.Parallel()
	c := longJobsCron(t, "")
	nextRun(c)
	c.Advance(5 * time.Minute)
	c.Converge()
	if got := cronJobNames(c); len(got) != 2 || len(c.CronJobs["default/nightly"].Status.Active) != 2 {
		t.Fatalf("allow: jobs %v active %v, want two running side by side", got, c.CronJobs["default/nightly"].Status.Active)
	}
}
