package jail

import "context"

// Release removes a pod's jail (its members are gone by now), or a
// container's mounts and limits.
func (d jailsDriver) Release(ctx context.Context, rec Record) error {
	if rec.Spec.Infra {
		if err := d.removeJail(ctx, rec.Jail); err != nil {
			return err
		}
		d.mu.Lock()
		delete(d.vnetOK, rec.Jail)
		d.mu.Unlock()
		return nil
	}
	if err := d.unmountAll(ctx, rec); err != nil {
		return err
	}
	return RemoveRctl(ctx, d.cfg.Runner, rec.Jail)
}
