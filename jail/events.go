package jail

import (
	"context"
	"slices"
)

func (j *Jails) emit(typ string, spec ContainerSpec, code int) {
	ev := Event{Type: typ, ID: spec.ID, Labels: spec.Labels, ExitCode: code, Time: j.clock.Now()}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range j.subs {
		select {
		case s <- ev:
		default: // a subscriber that does not read loses events; the agent reconciles
		}
	}
}

// Events implements Runtime. Ends of runs are found by polling the
// records (and checked before a container is started again or removed, so
// its died event comes first); a run that ended while no one subscribed is
// left to the agent's reconciliation.
func (j *Jails) Events(ctx context.Context) (<-chan Event, error) {
	ch := make(chan Event, 1024)
	j.mu.Lock()
	first := !j.watching
	j.watching = true
	j.mu.Unlock()
	if first {
		l, err := j.List(ctx, nil)
		if err != nil {
			return nil, err
		}
		j.mu.Lock()
		for _, st := range l {
			if st.State == StateExited {
				j.reported[st.ID] = st.FinishedAt
			}
		}
		j.mu.Unlock()
	}
	j.mu.Lock()
	j.subs = append(j.subs, ch)
	j.mu.Unlock()
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer func() {
			j.mu.Lock()
			j.subs = slices.DeleteFunc(j.subs, func(s chan Event) bool { return s == ch })
			j.mu.Unlock()
			close(ch)
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-j.clock.After(eventPoll):
			}
			l, err := j.List(ctx, nil)
			if err != nil {
				continue
			}
			for _, st := range l {
				j.noteDeath(st)
			}
		}
	}()
	return ch, nil
}

// noteDeath emits a died event for a run that ended, once.
func (j *Jails) noteDeath(st ContainerStatus) {
	if st.State != StateExited || st.Infra {
		return
	}
	j.mu.Lock()
	if !j.watching || j.starting[st.ID] {
		j.mu.Unlock()
		return
	}
	if t, ok := j.reported[st.ID]; ok && t.Equal(st.FinishedAt) {
		j.mu.Unlock()
		return
	}
	j.reported[st.ID] = st.FinishedAt
	j.mu.Unlock()
	j.emit(EventDied, ContainerSpec{ID: st.ID, Labels: st.Labels}, st.ExitCode)
}
