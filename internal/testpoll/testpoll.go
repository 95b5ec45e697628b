// Package testpoll is the wait tests use instead of sleeping for a
// condition: check it at an interval until it holds or a deadline passes;
// and, for a node's call to a manager, ask again while it is UNAVAILABLE.
//
// It is for tests only.
package testpoll

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Until checks cond every interval until it holds, and fails t, naming
// what it waited for, once d has passed without it.
func Until(t testing.TB, what string, d, interval time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(interval)
	}
}

// WhileUnavailable makes a node's call as an agent does: again while the
// manager answers UNAVAILABLE, until ctx ends. On a loaded machine a
// cluster of two managers, whose quorum is both, can be electing when a
// test makes its call.
//
// When ctx ends first, the error names the last UNAVAILABLE answer too:
// the call cut short by the deadline says only that.
func WhileUnavailable(ctx context.Context, call func() error) error {
	var unavailable error
	for {
		err := call()
		if status.Code(err) != codes.Unavailable {
			if err != nil && ctx.Err() != nil && unavailable != nil {
				return fmt.Errorf("%w (before, UNAVAILABLE: %v)", err, unavailable)
			}
			return err
		}
		unavailable = err
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
