package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

func TestWaitChange(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	from, err := n.s.Version()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- n.s.WaitChange(ctx, from, legion.KindSecret) }()
	// A change to another kind does not end the wait.
	if _, _, err := n.s.Put(ctx, config("default", "c", "x"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("a Config change ended a wait for Secrets: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	sec, _ := legion.New(legion.KindSecret)
	sec.GetMetadata().Name, sec.GetMetadata().Namespace = "s", "default"
	sec.(*legion.Secret).Spec.Data = []byte("v")
	if _, _, err := n.s.Put(ctx, sec, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a Secret change did not end the wait")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	now, _ := n.s.Version()
	if err := n.s.WaitChange(cctx, now); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
}

// A wait from a read at version 0 (before the store applied anything)
// sees a change made since, as a wait from any other read does: 0 is
// not "from now" here.
func TestWaitChangeFromVersionZero(t *testing.T) {
	t.Parallel()
	n := single(t)
	sec, _ := legion.New(legion.KindSecret)
	sec.GetMetadata().Name, sec.GetMetadata().Namespace = "s", "default"
	sec.(*legion.Secret).Spec.Data = []byte("v")
	if _, _, err := n.s.Put(context.Background(), sec, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := n.s.WaitChange(ctx, 0, legion.KindSecret); err != nil {
		t.Fatalf("a wait from version 0 after a Secret was written: %v", err)
	}
}
