package scheduler

import (
	"cmp"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/robfig/cron/v3"
)

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// cronJobs makes each CronJob's Job for the latest run due since its last
// schedule, applies suspend, startingDeadline and the concurrency policy,
// trims its finished Jobs to the history limits, and deletes the Jobs of
// CronJobs that are gone.
func (p *planner) cronJobs() {
	p.deletedJobs = map[*legion.Job]bool{}
	byCron := map[nsName][]*legion.Job{}
	names := map[nsName]bool{}
	for _, j := range p.st.Jobs {
		names[nsName{j.Metadata.Namespace, j.Metadata.Name}] = true
		if c, ok := j.Metadata.Labels[LabelCronJob]; ok {
			k := nsName{j.Metadata.Namespace, c}
			byCron[k] = append(byCron[k], j)
		}
	}
	cjs := slices.Clone(p.st.CronJobs)
	slices.SortFunc(cjs, func(a, b *legion.CronJob) int { return compareMeta(&a.Metadata, &b.Metadata) })
	seen := map[nsName]bool{}
	for _, cj := range cjs {
		k := nsName{cj.Metadata.Namespace, cj.Metadata.Name}
		seen[k] = true
		jobs := byCron[k]
		slices.SortFunc(jobs, func(a, b *legion.Job) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
		p.cronJob(cj, jobs, names)
	}
	var gone []*legion.Job
	for k, jobs := range byCron {
		if !seen[k] {
			gone = append(gone, jobs...)
		}
	}
	for _, j := range gone {
		p.deleteJob(j)
	}
}

func (p *planner) deleteJob(j *legion.Job) {
	if p.deletedJobs[j] {
		return
	}
	p.deletedJobs[j] = true
	p.res.DeleteJobs = append(p.res.DeleteJobs, j)
}

func (p *planner) cronJob(cj *legion.CronJob, jobs []*legion.Job, names map[nsName]bool) {
	st := cj.Status
	st.Active = nil
	sched, err := cronParser.Parse(cj.Spec.Schedule)
	if err != nil {
		st.Message = "schedule " + strconv.Quote(cj.Spec.Schedule) + ": " + err.Error()
		p.cronStatus(cj, st)
		return
	}
	var running []*legion.Job
	for _, j := range jobs {
		if !j.Status.State.Over() {
			running = append(running, j)
		}
	}
	now := p.now.UTC()
	from := st.LastSchedule
	if from == nil {
		from = st.CountedFrom
	}
	if from == nil {
		// First seen: earlier runs are not owed. That is not a run, so
		// LastSchedule stays unset (shown as none) until one falls due.
		t := now
		st.CountedFrom = &t
		p.wake(sched.Next(now))
	} else {
		due, next := latestDue(sched, from.UTC(), now)
		p.wake(next)
		if !due.IsZero() {
			d := due
			st.LastSchedule = &d
			when := due.Format(time.RFC3339)
			// A Namespace tightened since the CronJob was admitted holds
			// for its runs from then on.
			forbidden := p.nsOf(cj.Metadata.Namespace).security.ExcessMessage(cj.Metadata.Namespace, &cj.Spec.Job.Pod, "spec.job.pod")
			switch {
			case cj.Spec.Suspend:
				st.Message = legion.CronJobSkipped + when + ": suspended"
			case forbidden != "":
				st.Message = legion.CronJobSkipped + when + ": " + forbidden
			case cj.Spec.StartingDeadline != nil && now.Sub(due) > cj.Spec.StartingDeadline.D():
				st.Message = legion.CronJobSkipped + when + ": " + now.Sub(due).String() +
					" late, more than its startingDeadline of " + cj.Spec.StartingDeadline.String()
			case cj.Spec.ConcurrencyPolicy == legion.ConcurrencyForbid && len(running) > 0:
				st.Message = legion.CronJobSkipped + when + ": job " + running[0].Metadata.Name + " still runs"
			default:
				if cj.Spec.ConcurrencyPolicy == legion.ConcurrencyReplace {
					for _, j := range running {
						p.deleteJob(j)
					}
					running = nil
				}
				name := legion.CronJobRunName(cj.Metadata.Name, due)
				if !names[nsName{cj.Metadata.Namespace, name}] {
					j := &legion.Job{
						Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindJob,
							Metadata: legion.Metadata{Name: name, Namespace: cj.Metadata.Namespace,
								Labels: map[string]string{LabelCronJob: cj.Metadata.Name}}},
						Spec: cj.Spec.Job,
					}
					p.res.CreateJobs = append(p.res.CreateJobs, j)
					running = append(running, j)
				}
				st.Message = ""
			}
		}
	}
	for _, j := range running {
		st.Active = append(st.Active, j.Metadata.Name)
	}
	slices.Sort(st.Active)
	p.cronHistory(cj, jobs)
	p.cronStatus(cj, st)
}

// latestDue is the latest scheduled time in (last, now], zero if none, and
// the first one after now. A long absence is searched from a window that
// widens until it holds a run, so the walk stays short.
func latestDue(s cron.Schedule, last, now time.Time) (due, next time.Time) {
	start := last
	for span := time.Minute; ; span *= 2 {
		from := now.Add(-span)
		if !from.After(last) {
			break
		}
		if t := s.Next(from); !t.IsZero() && !t.After(now) {
			start = from
			break
		}
	}
	t := s.Next(start)
	for !t.IsZero() && !t.After(now) {
		due = t
		t = s.Next(t)
	}
	return due, t
}

// cronHistory keeps the newest finished Jobs per outcome.
func (p *planner) cronHistory(cj *legion.CronJob, jobs []*legion.Job) {
	var ok, bad []*legion.Job
	for _, j := range jobs {
		switch j.Status.State {
		case legion.JobComplete:
			ok = append(ok, j)
		case legion.JobFailed:
			bad = append(bad, j)
		}
	}
	trim := func(list []*legion.Job, keep int) {
		slices.SortFunc(list, func(a, b *legion.Job) int {
			if c := cmp.Compare(finishedAt(b).UnixNano(), finishedAt(a).UnixNano()); c != 0 {
				return c
			}
			return strings.Compare(b.Metadata.Name, a.Metadata.Name)
		})
		for i := keep; i < len(list); i++ {
			p.deleteJob(list[i])
		}
	}
	trim(ok, *cj.Spec.SuccessfulJobsHistoryLimit)
	trim(bad, *cj.Spec.FailedJobsHistoryLimit)
}

func finishedAt(j *legion.Job) time.Time {
	if j.Status.Finished != nil {
		return *j.Status.Finished
	}
	return time.Time{}
}

func (p *planner) cronStatus(cj *legion.CronJob, st legion.CronJobStatus) {
	if reflect.DeepEqual(st, cj.Status) {
		return
	}
	out := *cj
	out.Status = st
	p.res.UpdateCronJobs = append(p.res.UpdateCronJobs, &out)
}
