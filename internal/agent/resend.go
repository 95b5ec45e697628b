package agent

import "time"

// Resend is the wait of a report that no manager took (ErrNoManager):
// it goes again once ReportRetry has passed, then after twice the last
// wait, up to MaxReportRetry; or sooner, once ReportRetry has passed,
// when a leader has taken a call of the node since the refusal
// (Manager.LeaderCalls moved: an election is over, say). Without that a
// report refused through an election came as late as its wait, up to
// 16 s after the new leader, and held up whatever waited on the task's
// status (a rolling update). The zero Resend waits for nothing.
type Resend struct {
	wait    time.Duration // zero: nothing to send again
	refused time.Time
	calls   uint64 // Manager.LeaderCalls before the refused call
}

// Refused records a refusal at now of a call made when the leader had
// taken calls (Manager.LeaderCalls, read before it).
func (r *Resend) Refused(now time.Time, calls uint64) {
	r.wait, r.refused, r.calls = NextReportWait(r.wait), now, calls
}

// Due says whether the report goes again at now, the leader having taken
// calls so far.
func (r *Resend) Due(now time.Time, calls uint64) bool {
	if r.wait == 0 {
		return false
	}
	since := now.Sub(r.refused)
	return since >= r.wait || calls != r.calls && since >= ReportRetry
}

// Waiting says whether a report waits to go again.
func (r *Resend) Waiting() bool { return r.wait > 0 }
