package testpoll

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

// A call is made again while it is UNAVAILABLE, and any other answer,
// or the context's end, is returned.
func TestWhileUnavailableAsksAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	calls := 0
	answers := []error{status.Error(codes.Unavailable, "electing"), status.Error(codes.Unavailable, "electing"), nil}
	if err := WhileUnavailable(ctx, func() error { calls++; return answers[calls-1] }); err != nil || calls != 3 {
		t.Fatalf("%v after %d calls, want success on the third", err, calls)
	}
	calls = 0
	refused := status.Error(codes.PermissionDenied, "removed")
	if err := WhileUnavailable(ctx, func() error { calls++; return refused }); err != refused || calls != 1 {
		t.Fatalf("%v after %d calls, want the refusal after one", err, calls)
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if err := WhileUnavailable(ended, func() error { return status.Error(codes.Unavailable, "electing") }); status.Code(err) != codes.Unavailable {
		t.Fatalf("with the context ended: %v, want the last UNAVAILABLE", err)
	}
	// A call the deadline cuts short says why the ones before failed.
	cut, cancel := context.WithCancel(ctx)
	defer cancel()
	calls = 0
	err := WhileUnavailable(cut, func() error {
		if calls++; calls == 1 {
			return status.Error(codes.Unavailable, "not the leader")
		}
		cancel()
		return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	})
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "not the leader") {
		t.Fatalf("a call cut short by the deadline: %v, want its error naming the UNAVAILABLE before", err)
	}
}
