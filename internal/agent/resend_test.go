package agent

import (
	"testing"
	"time"
)

func TestResendWaitsDoubleUpToTheMost(t *testing.T) {
	var r Resend
	at := time.Unix(1000, 0)
	if r.Waiting() || r.Due(at.Add(time.Hour), 0) {
		t.Fatal("the zero Resend waits for something")
	}
	want := ReportRetry
	for range 8 {
		r.Refused(at, 7)
		if !r.Waiting() {
			t.Fatal("a refusal waits for nothing")
		}
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
