package agent

import (
	"testing"
	"time"
)

func TestResendWaitsDoubleUpToTheMost(t *testing.T) {
	var r Resend
	at := time.Unix(1000, 0)
	if r.Due(at.Add(time.Hour), 0) {
		t.Fatal("the zero Resend waits for something")
	}
	want := ReportRetry
	for range 8 {
		r.Refused(at, 7)
		if r.Due(at.Add(want-time.Millisecond), 7) {
			t.Fatalf("due before its wait of %s", want)
		}
		if !r.Due(at.Add(want), 7) {
			t.Fatalf("not due after its wait of %s", want)
		}
		want = min(2*want, MaxReportRetry)
	}
}

func TestResendIsDueOnceALeaderTookACall(t *testing.T) {
	var r Resend
	at := time.Unix(1000, 0)
	for range 4 {
		r.Refused(at, 7) // the wait is 8 s now
	}
	if r.Due(at.Add(ReportRetry), 7) {
		t.Fatal("due before its wait with no call taken since")
	}
	if r.Due(at.Add(ReportRetry-time.Millisecond), 8) {
		t.Fatal("due before ReportRetry with a call taken since")
	}
	if !r.Due(at.Add(ReportRetry), 8) {
		t.Fatal("not due at ReportRetry with a call taken since: it waits out the 8 s")
	}
}

func TestResendRefusedEarlyWaitsItsWholeNextWait(t *testing.T) {
	var r Resend
	at := time.Unix(1000, 0)
	r.Refused(at, 7)
	r.Refused(at, 7) // the wait is 2 s
	// A leader takes the node's heartbeats but refuses the report.
	if !r.Due(at.Add(ReportRetry), 8) {
		t.Fatal("not due at ReportRetry with a call taken since")
	}
	at = at.Add(ReportRetry)
	r.Refused(at, 8) // the wait is 4 s
	if r.Due(at.Add(ReportRetry), 9) {
		t.Fatal("an early try refused again is tried early again")
	}
	if !r.Due(at.Add(4*time.Second), 9) {
		t.Fatal("not due after its whole wait")
	}
	// That try, not early, refused: the next may be cut short again.
	at = at.Add(4 * time.Second)
	r.Refused(at, 9)
	if !r.Due(at.Add(ReportRetry), 10) {
		t.Fatal("a wait after a whole one is not cut short by a call taken")
	}
}
