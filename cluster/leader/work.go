package leader

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/legionbsd/legion/cluster/acme"
	"github.com/legionbsd/legion/cluster/controller"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/image"
)

// CheckPeriod is how often Run looks whether this manager leads, besides
// at each change of leader its store reports (and, before that, whether
// the daemon is a manager yet).
const CheckPeriod = time.Second

// Source gives the manager's store: nil while the daemon is no manager
// (before init or join, or a worker). *server.Server is one.
type Source interface {
	Store() *store.Store
}

// Options configure the leader's work.
type Options struct {
	// Signals are the nodes' heartbeats and usage reports: the manager's
	// dispatcher (server.Server.Dispatcher).
	Signals controller.Signals
	// Registry resolves tags and reads signatures; nil means a registry
	// client of its own.
	Registry *image.Registry
	// Mover carries Volume data between nodes for the migrator: the
	// manager's sessions service (server.Server.Sessions). Without one no
	// migrator runs, and migrations stay as the planner records them.
	Mover VolumeMover
	// Period is how often leadership is checked (CheckPeriod when zero).
	Period time.Duration
	Logger *slog.Logger
	// Passed, when set, is told the outcome of every planning pass this
	// manager makes while it leads (the manager's metrics).
	Passed func(controller.PassResult)

	// cache is the planner's objects, kept by Run whether this manager
	// leads or not; nil: each term's controller loop keeps its own.
	cache *controller.Cache
	// started, when set, is told each term's controller loop as it starts
	// (tests).
	started func(*controller.Loop)
}

func (o *Options) defaults() {
	if o.Registry == nil {
		o.Registry = &image.Registry{}
	}
	if o.Period <= 0 {
		o.Period = CheckPeriod
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Tasks is the work a leading manager does over its store: the controller
// loop, the VIP allocator, the image resolver, the ACME certificates of
// Routes and, given a Mover, the volume migrator.
func Tasks(st *store.Store, o Options) []Task {
	o.defaults()
	log := o.Logger
	tasks := []Task{
		{Name: "controller", Run: func(ctx context.Context) error {
			l := &controller.Loop{Store: st, Signals: o.Signals, Logger: log, LeaderSince: Since(ctx), Cache: o.cache, Passed: o.Passed}
			if o.started != nil {
				o.started(l)
			}
			return l.Run(ctx)
		}},
		{Name: "VIP allocator", Run: func(ctx context.Context) error { return RunVIPAllocator(ctx, st, log) }},
		{Name: "image resolver", Run: (&controller.ImageResolver{Store: st, Resolve: Resolve(o.Registry),
			Check: Check(st, o.Registry), Covers: Covers(st), Logger: log}).Run},
		{Name: "ACME", Run: (&acme.Controller{Store: st, Logger: log}).Run},
	}
	if o.Mover != nil {
		tasks = append(tasks, Task{Name: "volume migrator", Run: func(ctx context.Context) error {
			return (&Migrator{Store: st, Mover: o.Mover, Logger: log}).Run(ctx)
		}})
	}
	return tasks
}

// Run does the leader's work whenever this manager leads, until ctx ends:
// it waits for the daemon to become a manager (an init or a join may come
// later), then starts Tasks on each leadership term and stops them when
// the term ends.
func Run(ctx context.Context, src Source, o Options) {
	o.defaults()
	tick := time.NewTicker(o.Period)
	defer tick.Stop()
	st := src.Store()
	for st == nil {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		st = src.Store()
	}
	// The planner's objects are kept from the store's events on every
	// manager, so a new leader plans at once (controller.Cache).
	o.cache = controller.NewCache(st)
	cached := make(chan struct{})
	go func() {
		defer close(cached)
		for {
			err := o.cache.Run(ctx)
			if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
				return
			}
			// Meanwhile the controller loop reads the store at each pass.
			o.Logger.Warn("the planner's cache stopped following the store; reading it again", "err", err, "in", o.Period)
			select {
			case <-ctx.Done():
				return
			case <-time.After(o.Period):
			}
		}
	}()
	defer func() { <-cached }()
	RunWhileLeader(ctx, st, o.Period, o.Logger, Tasks(st, o)...)
}
