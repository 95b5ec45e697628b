// Package testpoll is the wait tests use instead of sleeping for a
// condition: check it at an interval until it holds or a deadline passes.
//
// It is for tests only.
package testpoll

import (
	"testing"
	"time"
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
