package jail

import (
	"context"
	"errors"
)

// Remove implements Runtime.
func (j *Jails) Remove(ctx context.Context, id string) error {
	rec, err := j.records.Get(id)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if rec.Spec.Infra {
		ids, err := j.records.IDs()
		if err != nil {
			return err
		}
		for _, mid := range ids {
			if m, err := j.records.Get(mid); err == nil && m.Spec.Pod == id {
				if err := j.Remove(ctx, mid); err != nil {
					return err
				}
			}
		}
		if err := j.removeJail(ctx, rec.Jail); err != nil {
			return err
		}
		j.mu.Lock()
		delete(j.vnetOK, rec.Jail)
		j.mu.Unlock()
	} else {
		st, err := j.status(ctx, rec)
		if err != nil {
			return err
		}
		if st.State == StateRunning {
			// The supervisor ends it at once and reports; should it not,
			// Stop removes the jail itself.
			if err := j.Stop(ctx, id, 0); err != nil {
				return err
			}
			if st, err = j.status(ctx, rec); err != nil {
				return err
			}
		}
		j.noteDeath(st)
		if err := j.unmountAll(ctx, rec); err != nil {
			return err
		}
		if err := RemoveRctl(ctx, j.cfg.Runner, rec.Jail); err != nil {
			return err
		}
	}
	if err := j.records.Remove(id); err != nil {
		return err
	}
	j.mu.Lock()
	delete(j.reported, id)
	j.mu.Unlock()
	j.emit(EventRemoved, rec.Spec, 0)
	return nil
}
