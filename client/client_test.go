package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/leakcheck"
	"github.com/legionbsd/legion/internal/testcluster"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// initialised is a one-manager cluster and an admin client to it.
func initialised(t *testing.T) (*testcluster.Manager, *client.Client) {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{})
	return c.Managers[0], c.Client()
}

func config(name, text string) legion.Object {
	o, _ := legion.New(legion.KindConfig)
	o.GetMetadata().Name = name
	o.(*legion.Config).Spec.Text = text
	return o
}

func TestTypedCallsAndErrors(t *testing.T) {
	t.Parallel()
	_, c := initialised(t)
	ctx := context.Background()
	r, err := c.ApplyOne(ctx, config("a", "x"), client.ApplyOptions{})
	if err != nil || r.Outcome != client.Created || r.Previous != nil {
		t.Fatalf("apply: %+v %v", r, err)
	}
	zero := uint64(0)
	if _, err := c.ApplyOne(ctx, config("a", "y"), client.ApplyOptions{ExpectedVersion: &zero}); !errors.Is(err, client.ErrAborted) {
		t.Fatalf("expected none, found one: %v", err)
	}
	cfg, err := client.GetAs[*legion.Config](ctx, c, legion.KindConfig, "", "a")
	if err != nil || string(cfg.Spec.Data) != "x" {
		t.Fatalf("GetAs: %+v %v", cfg, err)
	}
	if _, err := client.GetAs[*legion.Secret](ctx, c, legion.KindConfig, "", "a"); err == nil {
		t.Fatal("GetAs with the wrong type succeeded")
	}
	stale := cfg.Metadata.Version - 1
	if _, err := c.Delete(ctx, legion.KindConfig, "", "a", &stale); !errors.Is(err, client.ErrAborted) {
		t.Fatalf("delete at a stale version: %v", err)
	}
	if _, err := c.Get(ctx, legion.KindConfig, "", "nope"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("get of nothing: %v", err)
	}
}

// A single call made while the manager restarts is asked again until it
// answers.
func TestSingleCallsRetryWhileTheManagerRestarts(t *testing.T) {
	t.Parallel()
	d, c := initialised(t)
	ctx := context.Background()
	if _, err := c.ApplyOne(ctx, config("a", "x"), client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	d.Stop()
	restarted := make(chan struct{})
	go func() {
		defer close(restarted)
		time.Sleep(300 * time.Millisecond) // the manager is away for a while
		d.Restart()
	}()
	_, err := c.Get(ctx, legion.KindConfig, "", "a")
	<-restarted
	if err != nil {
		t.Fatalf("get across a restart: %v", err)
	}
}

// After a restart the watch history is empty: an old version is
// compacted, and ListWatch lists again when its stream breaks.
func TestListWatchListsAgain(t *testing.T) {
	t.Parallel()
	d, c := initialised(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.ApplyOne(ctx, config("a", "x"), client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	updates := make(chan client.Update, 16)
	lw := make(chan error, 1)
	go func() {
		lw <- c.ListWatch(ctx, legion.KindConfig, client.ListOptions{}, func(u client.Update) error {
			updates <- u
			return nil
		})
	}()
	first := <-updates
	if !first.Listed || len(first.Objects) != 1 {
		t.Fatalf("first update: %+v", first)
	}
	if _, err := c.ApplyOne(ctx, config("b", "x"), client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	ev := <-updates
	if ev.Listed || ev.Event.Type != client.Added || ev.Event.Object.GetMetadata().Name != "b" {
		t.Fatalf("event: %+v", ev)
	}
	d.Restart()
	// The stream broke; the helper lists again once the manager is back.
	again := <-updates
	if !again.Listed || len(again.Objects) != 2 {
		t.Fatalf("update after the restart: %+v", again)
	}
	w, err := c.Watch(ctx, legion.KindConfig, client.ListOptions{}, 1)
	if err == nil {
		_, err = w.Next()
		w.Close()
	}
	if !errors.Is(err, client.ErrCompacted) {
		t.Fatalf("watch from version 1 after a restart: %v, want ErrCompacted", err)
	}
	cancel()
	if err := <-lw; !errors.Is(err, context.Canceled) {
		t.Fatalf("ListWatch ended with %v", err)
	}
}
