package process

import (
	"context"

	"github.com/legionbsd/legion/jail"
)

// Usage implements jail.Runtime: what the processes of the container's
// session use, read from /proc where there is one (Linux). Elsewhere it
// counts the main process only, with zeros for the rest.
func (r *Runtime) Usage(ctx context.Context, id string) (jail.Usage, error) {
	rec, err := r.records.Get(id)
	if err != nil {
		return jail.Usage{}, err
	}
	st, err := r.Status(ctx, rec)
	if err != nil {
		return jail.Usage{}, err
	}
	if rec.Spec.Infra || st.State != jail.StateRunning || st.Pid <= 0 {
		return jail.Usage{}, nil
	}
	// The main process leads its own session (Setsid): its session id is
	// its pid, shared by everything it starts that does not leave it.
	if u, ok := r.sessions.usage(st.Pid); ok {
		return u, nil
	}
	if r.cfg.Alive(st.Pid) {
		return jail.Usage{Processes: 1}, nil
	}
	return jail.Usage{}, nil
}
