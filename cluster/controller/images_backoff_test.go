package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/logtest"
)

// A tag that does not resolve is asked again after 1 s, then after twice
// as long each time up to 5 minutes, once for all the owners using it;
// each owner logs its error once, again only when it changes, and once
// when it resolves.
func TestImageResolverBacksOffAndLogsOnce(t *testing.T) {
	t.Parallel()
	s := openStore(t)
	const img = "registry.invalid/shop/web:1"
	for _, name := range []string{"a", "b"} {
		put(t, s, `apiVersion: legion/v1
kind: Service
metadata: {name: `+name+`}
spec:
  pod: {containers: [{name: c, image: `+img+`}]}
`)
	}
	now := time.Unix(1_000_000, 0)
	var calls []time.Time
	failWith := errors.New("dial tcp: no such host")
	resolve := func(ctx context.Context, ref string, _ [][]byte) (string, error) {
		calls = append(calls, now)
		if failWith != nil {
			return "", failWith
		}
		return "sha256:" + strings.Repeat("a", 64), nil
	}
	var log logtest.Buffer
	r := &ImageResolver{Store: s, Resolve: resolve, Now: func() time.Time { return now },
		Logger: log.Logger()}
	r.defaults()
	// A pass and the namespace's worker it starts, to their end.
	pass := func(ctx context.Context) (bool, time.Time) {
		r.pass(ctx)
		r.Wait()
		return r.outcome()
	}
	start := now
	failed, next := pass(context.Background())
	if !failed || len(calls) != 1 {
		t.Fatalf("first pass: failed %v, %d registry calls (want 1 for two owners of one tag)", failed, len(calls))
	}
	if n := log.Count("resolving images"); n != 2 {
		t.Fatalf("%d failure lines after the first pass, want one per owner:\n%s", n, log.String())
	}
	// Early passes (another object changed) ask nothing.
	now = now.Add(RetryFirst / 2)
	pass(context.Background())
	if len(calls) != 1 {
		t.Fatalf("a pass before the retry was due asked the registry (%d calls)", len(calls))
	}
	// Each retry comes when the last pass said, doubling up to RetryMax.
	for len(calls) < 14 {
		now = next
		if _, next = pass(context.Background()); next.IsZero() {
			t.Fatal("a failing pass gave no retry time")
		}
	}
	want := RetryFirst
	for i := 1; i < len(calls); i++ {
		if gap := calls[i].Sub(calls[i-1]); gap != want {
			t.Fatalf("retry %d came %s after the last, want %s (calls at %v from %v)", i, gap, want, calls, start)
		}
		want = min(want*2, RetryMax)
	}
	if want != RetryMax {
		t.Fatalf("the waits never reached %s", RetryMax)
	}
	if n := log.Count("resolving images"); n != 2 {
		t.Fatalf("the same error was logged again: %d lines\n%s", n, log.String())
	}
	// Another error is said once more per owner.
	failWith = errors.New("401 Unauthorized")
	now = next
	_, next = pass(context.Background())
	if n := log.Count("resolving images"); n != 4 {
		t.Fatalf("%d failure lines after the error changed, want 4\n%s", n, log.String())
	}
	// Resolved: said once per owner, and nothing more is asked.
	failWith = nil
	now = next
	if failed, _ := pass(context.Background()); failed {
		t.Fatal("the pass failed once the registry answered")
	}
	if n := log.Count("images resolved"); n != 2 {
		t.Fatalf("%d recovery lines, want one per owner\n%s", n, log.String())
	}
	asked := len(calls)
	now = now.Add(time.Hour)
	pass(context.Background())
	if len(calls) != asked || log.Count("resolving images") != 4 {
		t.Fatalf("after resolving: %d more calls, log\n%s", len(calls)-asked, log.String())
	}
}
