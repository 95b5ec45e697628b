package audit

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// FlushPeriod is how often a manager writes (leader) or hands on
// (follower) what it recorded.
const FlushPeriod = time.Second

// pruneEvery is how often the leader applies the retention when it has
// nothing to write; after each write it applies it at once.
const pruneEvery = time.Minute

// Leading is a manager's store as the flusher needs it.
type Leading interface {
	Store
	IsLeader() bool
}

// Flusher moves a manager's recorded events on: the leader writes them
// as batches and applies the retention, a follower hands them to the
// leader. What fails is held for the next round.
type Flusher struct {
	Recorder *Recorder
	// Store is the manager's store; nil while the daemon is no manager.
	Store func() Leading
	// Hand gives events to the leader (Cluster.RecordAudit).
	Hand      func(ctx context.Context, events []Event) error
	Retention Retention
	Period    time.Duration // FlushPeriod when zero
	Now       func() time.Time
	Logger    *slog.Logger

	lastPrune time.Time
	// kept is the leader's list of the stored batches in name order, kept
	// up as it writes and prunes, so a round's retention reads no batch
	// (listing them decodes every event kept: up to 100,000). It is read
	// from the store again when this manager takes the lead and every
	// pruneEvery, which catches whatever else changed them (a restore).
	kept   []batch
	listed time.Time // when kept was read; zero: read it again
	led    bool      // this manager led at the last round
}

// Run flushes every period, and sooner when the recorder holds many
// events (Recorder.Pressed), until ctx ends.
func (f *Flusher) Run(ctx context.Context) {
	if f.Period <= 0 {
		f.Period = FlushPeriod
	}
	tick := time.NewTicker(f.Period)
	defer tick.Stop()
	failed := false
	for {
		pressed := f.Recorder.Pressed()
		if failed {
			pressed = nil // after a failure the period is waited out, not each Record
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-pressed:
		}
		err := f.Flush(ctx)
		failed = err != nil
		if err != nil && ctx.Err() == nil {
			f.logger().Warn("audit: events held for the next round", "err", err, "held", f.Recorder.Len())
		}
	}
}

func (f *Flusher) logger() *slog.Logger {
	if f.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Logger
}

func (f *Flusher) now() time.Time {
	if f.Now == nil {
		return time.Now()
	}
	return f.Now()
}

// Flush does one round.
func (f *Flusher) Flush(ctx context.Context) error {
	st := f.Store()
	if st == nil {
		return nil // no manager yet: held
	}
	if !st.IsLeader() {
		f.led = false
		events := f.Recorder.Take()
		if len(events) == 0 {
			return nil
		}
		if err := f.Hand(ctx, events); err != nil {
			f.Recorder.PutBack(events)
			return err
		}
		return nil
	}
	now := f.now()
	if !f.led || now.Sub(f.listed) >= pruneEvery {
		f.listed = time.Time{}
	}
	f.led = true
	events := f.Recorder.Take()
	if len(events) > 0 {
		n, written, err := write(ctx, st, now, events)
		f.keep(written)
		if err != nil {
			f.Recorder.PutBack(events[n:])
			return err
		}
	} else if now.Sub(f.lastPrune) < pruneEvery {
		return nil
	}
	f.lastPrune = now
	if f.listed.IsZero() {
		bs, _, err := batches(st)
		if err != nil {
			return err
		}
		f.kept, f.listed = bs, now
	}
	gone, err := prune(ctx, st, now, f.Retention, f.kept)
	f.kept = f.kept[len(gone):]
	if err != nil {
		f.listed = time.Time{} // a delete may have landed: read them again
	}
	return err
}

// keep adds batches just written to the list of those stored.
func (f *Flusher) keep(written []batch) {
	if f.listed.IsZero() || len(written) == 0 {
		return // read from the store before the next prune
	}
	f.kept = append(f.kept, written...)
	slices.SortFunc(f.kept, func(a, b batch) int { return strings.Compare(a.name, b.name) })
}
