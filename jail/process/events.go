package process

import (
	"context"
	"slices"

	"github.com/legionbsd/legion/jail"
)

func (r *Runtime) emit(typ string, spec jail.ContainerSpec, code int) {
	ev := jail.Event{Type: typ, ID: spec.ID, Labels: spec.Labels, ExitCode: code, Time: r.clock.Now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.subs {
		select {
		case s <- ev:
		default: // a subscriber that does not read loses events; the agent reconciles
		}
	}
}

// Events implements jail.Runtime. Ends of runs are found by polling the
// records (and checked before a container starts again or goes, so its
// died event comes first); a run that ended while no one subscribed is
// left to the agent's reconciliation. There are no OOM events: nothing
// limits memory here.
func (r *Runtime) Events(ctx context.Context) (<-chan jail.Event, error) {
	ch := make(chan jail.Event, 1024)
	r.mu.Lock()
	first := !r.watching
	r.watching = true
	r.mu.Unlock()
	if first {
		l, err := r.List(ctx, nil)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		for _, st := range l {
			if st.State == jail.StateExited {
				r.reported[st.ID] = st.FinishedAt
			}
		}
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.subs = append(r.subs, ch)
	r.mu.Unlock()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer func() {
			r.mu.Lock()
			r.subs = slices.DeleteFunc(r.subs, func(s chan jail.Event) bool { return s == ch })
			r.mu.Unlock()
			close(ch)
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.clock.After(watchEvery):
			}
			l, err := r.List(ctx, nil)
			if err != nil {
				continue
			}
			for _, st := range l {
				r.noteDeath(st)
			}
		}
	}()
	return ch, nil
}

// noteDeath emits a died event for a run that ended, once per run.
func (r *Runtime) noteDeath(st jail.ContainerStatus) {
	if st.State != jail.StateExited || st.Infra {
		return
	}
	r.mu.Lock()
	if !r.watching || r.starting[st.ID] {
		r.mu.Unlock()
		return
	}
	if t, ok := r.reported[st.ID]; ok && t.Equal(st.FinishedAt) {
		r.mu.Unlock()
		return
	}
	r.reported[st.ID] = st.FinishedAt
	r.mu.Unlock()
	r.emit(jail.EventDied, jail.ContainerSpec{ID: st.ID, Labels: st.Labels}, st.ExitCode)
}
