package agent

import "time"

// Resend is the wait of a report, or a Volume claim, that no manager
// took (ErrNoManager): it goes again once ReportRetry has passed, then
// after twice the last wait, up to MaxReportRetry; or sooner, once
// ReportRetry has passed, when a leader has taken a call of the node
// since the refusal (Manager.LeaderCalls moved: an election is over,
// say). Without that a
// report refused through an election came as late as its wait, up to
// 16 s after the new leader, and held up whatever waited on the task's
// status (a rolling update). A try made early that is refused again
// waits its whole next wait: a leader that takes heartbeats but not
// reports is not asked every second. The zero Resend waits for nothing.
type Resend struct {
	wait    time.Duration // zero: nothing to send again
	refused time.Time
	calls   uint64 // Manager.LeaderCalls before the refused call
	early   bool   // Due cut the wait short
	patient bool   // an early try was refused: this wait is not cut short
}

// Refused records a refusal at now of a call made when the leader had
// taken calls (Manager.LeaderCalls, read before it).
func (r *Resend) Refused(now time.Time, calls uint64) {
	r.wait, r.refused, r.calls = min(max(2*r.wait, ReportRetry), MaxReportRetry), now, calls
	r.patient, r.early = r.early, false
}

// Due says whether the report goes again at now, the leader having taken
// calls so far; the caller then sends it.
func (r *Resend) Due(now time.Time, calls uint64) bool {
	if r.wait == 0 {
		return false
	}
	since := now.Sub(r.refused)
	if since >= r.wait {
		return true
	}
	r.early = !r.patient && calls != r.calls && since >= ReportRetry
	return r.early
}
