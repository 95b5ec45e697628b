package jail

import (
	"context"
)

// Usage implements Runtime: rctl's accounting of the container's jail,
// with memory from the per-page count when there is one.
func (j *Jails) Usage(ctx context.Context, id string) (Usage, error) {
	rec, err := j.records.Get(id)
	if err != nil {
		return Usage{}, err
	}
	u, err := RctlUsage(ctx, j.cfg.Runner, rec.Jail)
	if err != nil {
		return Usage{}, err
	}
	if j.cfg.Memory != nil && !rec.Spec.Infra {
		if n, err := j.cfg.Memory.JailMemory(ctx, rec.Jail); err == nil {
			u.MemoryBytes = n
		}
	}
	return u, nil
}

// Limited lists the running containers with a memory limit, for the
// OOMKiller's once-a-second pass.
func (j *Jails) Limited(ctx context.Context) []Limited {
	all, err := j.List(ctx, nil)
	if err != nil {
		j.log.Warn("memory limits: list", "err", err)
		return nil
	}
	var out []Limited
	for _, st := range all {
		if st.State != StateRunning || st.Infra {
			continue
		}
		rec, err := j.records.Get(st.ID)
		if err != nil || rec.Spec.Resources.MemoryBytes <= 0 {
			continue
		}
		out = append(out, Limited{Jail: rec.Jail, Limit: rec.Spec.Resources.MemoryBytes})
	}
	return out
}
