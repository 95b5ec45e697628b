package probe

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/legionbsd/legion"
)

// Kind is which of a container's probes a result is of.
type Kind string

const (
	Startup   Kind = "startup"
	Liveness  Kind = "liveness"
	Readiness Kind = "readiness"
)

// Result is one transition. Passing is the probe's new state: for
// readiness, whether the container is ready; for liveness, false when it
// failed (the agent stops the container) and true when it recovered; for
// startup, true once it passed and false when it failed for good (the
// prober then ends). Reason says why the last check failed.
type Result struct {
	Kind    Kind
	Passing bool
	Reason  string
	Time    time.Time
}

// Defaults for fields a probe leaves zero (admission fills them in; a
// prober must not spin on a zero period all the same).
const (
	DefaultPeriod           = 10 * time.Second
	DefaultTimeout          = time.Second
	DefaultFailureThreshold = 3
	DefaultSuccessThreshold = 1
)

// Config is one container's probing.
type Config struct {
	Probes legion.Probes
	// Pod resolves named ports; Host is the address network probes go
	// to (the pod's IP).
	Pod  *legion.PodSpec
	Host string
	// Exec runs exec probes in the container.
	Exec Execer
	// Started is when the container started (initial delays count from
	// it); now when zero. An adopted container gives its start time.
	Started time.Time
	// Ready starts the readiness probe passing: a container adopted ready
	// keeps serving until the probe fails, instead of waiting unready
	// for its first pass (or, failing, never being reported at all).
	Ready bool
	// Report receives the transitions, one call at a time, in order.
	Report func(Result)
	Log    *slog.Logger
}

// Prober runs one container's probes.
type Prober struct {
	cfg                        Config
	startup, liveness, readies *probeRun
}

// probeRun is one configured probe with its check.
type probeRun struct {
	kind                 Kind
	check                checker
	delay, period, limit time.Duration
	failTh, succTh       int
}

func newRun(kind Kind, p *legion.Probe, cfg Config) (*probeRun, error) {
	if p == nil {
		return nil, nil
	}
	c, err := newChecker(p, cfg.Pod, cfg.Host, cfg.Exec)
	if err != nil {
		return nil, fmt.Errorf("%s probe: %w", kind, err)
	}
	r := &probeRun{kind: kind, check: c, delay: time.Duration(p.InitialDelay), period: time.Duration(p.Period),
		limit: time.Duration(p.Timeout), failTh: p.FailureThreshold, succTh: p.SuccessThreshold}
	if r.period <= 0 {
		r.period = DefaultPeriod
	}
	if r.limit <= 0 {
		r.limit = DefaultTimeout
	}
	if r.failTh <= 0 {
		r.failTh = DefaultFailureThreshold
	}
	if r.succTh <= 0 {
		r.succTh = DefaultSuccessThreshold
	}
	if kind != Readiness {
		r.succTh = 1 // as admission requires
	}
	return r, nil
}

// New checks the probes (ports resolve, one sort each) and returns their
// prober. Report is required.
func New(cfg Config) (*Prober, error) {
	if cfg.Report == nil {
		return nil, fmt.Errorf("prober: Report: missing")
	}
	if cfg.Started.IsZero() {
		cfg.Started = time.Now()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	p := &Prober{cfg: cfg}
	var err error
	if p.startup, err = newRun(Startup, cfg.Probes.Startup, cfg); err != nil {
		return nil, err
	}
	if p.liveness, err = newRun(Liveness, cfg.Probes.Liveness, cfg); err != nil {
		return nil, err
	}
	if p.readies, err = newRun(Readiness, cfg.Probes.Readiness, cfg); err != nil {
		return nil, err
	}
	return p, nil
}

// Run probes until ctx ends (or a startup probe fails for good) and
// returns then. The caller owns it: run it in a goroutine of the
// container's worker and cancel ctx when the container stops.
func (p *Prober) Run(ctx context.Context) {
	var mu sync.Mutex
	report := func(kind Kind, passing bool, reason string) {
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() != nil {
			return // the container is being let go: nothing more to say
		}
		p.cfg.Log.Info("probe transition", "probe", kind, "passing", passing, "reason", reason)
		p.cfg.Report(Result{Kind: kind, Passing: passing, Reason: reason, Time: time.Now()})
	}
	if p.startup != nil {
		passed := false
		p.startup.loop(ctx, p.cfg.Started, false, func(passing bool, reason string) bool {
			passed = passing
			report(Startup, passing, reason)
			return true // passed or failed for good: startup ends either way
		})
		if !passed {
			return
		}
	}
	if p.readies == nil {
		report(Readiness, true, "")
	}
	var wg sync.WaitGroup
	for _, r := range []*probeRun{p.liveness, p.readies} {
		if r == nil {
			continue
		}
		// Alive until shown otherwise; not ready until shown, unless it
		// was ready already.
		initial := r.kind == Liveness || p.cfg.Ready
		wg.Go(func() {
			r.loop(ctx, p.cfg.Started, initial, func(passing bool, reason string) bool {
				report(r.kind, passing, reason)
				return false
			})
		})
	}
	wg.Wait()
}

// loop checks every period from started+delay on, starting in state
// passing. It calls change on each transition: to passing after succTh
// successes in a row, to failing after failTh failures in a row (for a
// probe that starts failing, as startup does, failTh failures report the
// failure again). It ends when ctx does or change returns true.
func (r *probeRun) loop(ctx context.Context, started time.Time, passing bool, change func(passing bool, reason string) bool) {
	if wait := time.Until(started.Add(r.delay)); wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	tick := time.NewTicker(r.period)
	defer tick.Stop()
	succ, fail := 0, 0
	for {
		cctx, cancel := context.WithTimeout(ctx, r.limit)
		err := r.check.check(cctx)
		timedOut := cctx.Err() != nil
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if timedOut {
				err = fmt.Errorf("%w (timeout %v)", err, r.limit)
			}
			succ, fail = 0, fail+1
			if fail >= r.failTh && (passing || r.kind == Startup) {
				passing = false
				if change(false, err.Error()) {
					return
				}
			}
		} else {
			succ, fail = succ+1, 0
			if succ >= r.succTh && !passing {
				passing = true
				if change(true, "") {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
