package daemon

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/scheduler"
)

// Local connects an agent to the manager in the same process: it reads
// the node's assignments from the local replica and writes task status
// to the store, and keeps the heartbeats and usage the controller loop
// plans with. It is the dispatcher's work without the network between.
type Local struct {
	Store *store.Store
	Node  string

	mu    sync.Mutex
	beats map[string]time.Time
	usage []scheduler.Usage
}

var (
	_ agent.Manager = (*Local)(nil)
)

// Heartbeat records that a node was heard from.
func (l *Local) Heartbeat(node string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.beats == nil {
		l.beats = map[string]time.Time{}
	}
	l.beats[node] = at
}

// ReportUsage replaces the usage reports (the node's tasks, as sampled
// with its heartbeat).
func (l *Local) ReportUsage(u []scheduler.Usage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.usage = u
}

// Heartbeats implements controller.Signals.
func (l *Local) Heartbeats() map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]time.Time, len(l.beats))
	for k, v := range l.beats {
		out[k] = v
	}
	return out
}

// Usage implements controller.Signals.
func (l *Local) Usage() []scheduler.Usage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]scheduler.Usage(nil), l.usage...)
}

// Assignments implements agent.Manager: a new set after every change to
// tasks, secrets, configs, services, namespaces, network policies or
// routes.
func (l *Local) Assignments(ctx context.Context) (<-chan agent.Assignments, error) {
	out := make(chan agent.Assignments, 1)
	go func() {
		defer close(out)
		for ctx.Err() == nil {
			as, at, err := l.assignments()
			if err != nil {
				return
			}
			select {
			case out <- as:
			case <-ctx.Done():
				return
			}
			if err := l.Store.WaitChange(ctx, at, legion.KindTask, legion.KindSecret, legion.KindConfig, legion.KindService,
				legion.KindNamespace, legion.KindNetworkPolicy, legion.KindRoute); err != nil {
				return
			}
		}
	}()
	return out, nil
}

func (l *Local) assignments() (agent.Assignments, uint64, error) {
	v, err := dispatcher.ReadView(l.Store, l.Node)
	if err != nil {
		return agent.Assignments{}, 0, err
	}
	return agent.Assignments{Tasks: v.Tasks, Values: v.Values, Endpoints: v.Endpoints, Peers: v.Peers,
		Routes: v.Routes, Policies: &v.Policies}, v.At, nil
}

// Report implements agent.Manager: the task's status is replaced, its
// spec kept, retrying when the planner wrote the task meanwhile.
func (l *Local) Report(ctx context.Context, namespace, name string, st legion.TaskStatus) error {
	for attempt := 0; ; attempt++ {
		o, _, err := l.Store.Get(legion.KindTask, namespace, name)
		if err != nil {
			return err
		}
		t := o.(*legion.Task)
		t.Status = st
		_, err = l.Store.PutStatus(ctx, t, store.Precondition{Version: t.Metadata.Version})
		if err == nil || !errors.Is(err, store.ErrConflict) || attempt >= 10 {
			return err
		}
	}
}
