package jail

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Adopt takes over the containers an earlier agent left running: each
// running jail's parameters are read back and, where they are looser than
// its profile, tightened in place (jail -m), and each container's limits
// are added again.
func (j *Jails) Adopt(ctx context.Context) error {
	all, err := j.List(ctx, nil)
	if err != nil {
		return err
	}
	// Pods first: a child may have only what its parent has.
	slices.SortStableFunc(all, func(a, b ContainerStatus) int {
		if a.Infra == b.Infra {
			return 0
		}
		if a.Infra {
			return -1
		}
		return 1
	})
	var errs []error
	for _, st := range all {
		if st.State != StateRunning {
			continue
		}
		rec, err := j.records.Get(st.ID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		want := rec.Params
		if rec.Spec.Infra {
			want = append([]Param{{"vnet", "new"}}, rec.Params...)
		}
		if err := j.readBack(ctx, rec.Jail, want); err != nil {
			if !errors.Is(err, ErrProfileMismatch) {
				errs = append(errs, err)
				continue
			}
			j.log.Warn("adopted jail looser than its profile; tightening", "jail", rec.Jail, "err", err)
			args := append([]string{"-m", "name=" + rec.Jail}, paramArgs(rec.Params)...)
			if _, err := j.run(ctx, "jail", args...); err != nil {
				errs = append(errs, fmt.Errorf("tighten jail %s: %w", rec.Jail, err))
				continue
			}
			if err := j.readBack(ctx, rec.Jail, want); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if rec.Spec.Infra {
			j.mu.Lock()
			j.vnetOK[rec.Jail] = true
			j.mu.Unlock()
			continue
		}
		if err := AddRctl(ctx, j.cfg.Runner, rec.Jail, rec.Spec.Resources); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
