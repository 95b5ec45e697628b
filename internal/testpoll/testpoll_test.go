package testpoll

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalRecorder keeps what Until fails with and ends the goroutine, as
// t.Fatalf does.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func until(d time.Duration, cond func() bool) string {
	r := &fatalRecorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Until(r, "the thing", d, time.Millisecond, cond)
	}()
	<-done
	return r.msg
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	calls := 0
	if msg := until(time.Minute, func() bool { calls++; return calls == 3 }); msg != "" || calls != 3 {
		t.Fatalf("failed with %q after %d checks, want success on the third", msg, calls)
	}
}

func TestUntilFailsNamingWhatItWaitedFor(t *testing.T) {
	t.Parallel()
	msg := until(20*time.Millisecond, func() bool { return false })
	if !strings.Contains(msg, "timed out after 20ms waiting for the thing") {
		t.Fatalf("failure %q, want it to name the wait and the limit", msg)
	}
}
