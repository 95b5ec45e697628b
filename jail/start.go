package jail

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/legionbsd/legion/sys"
)

// checkVnet makes sure a pod's jail has a network stack of its own before
// a member starts: one with vnet=inherit would share the host's.
func (j *Jails) checkVnet(ctx context.Context, infraJail string) error {
	j.mu.Lock()
	ok := j.vnetOK[infraJail]
	j.mu.Unlock()
	if ok {
		return nil
	}
	if err := j.readBack(ctx, infraJail, []Param{{"vnet", "new"}}); err != nil {
		return fmt.Errorf("%w: pod jail %s has no VNET of its own: %w", ErrPermanent, infraJail, err)
	}
	j.mu.Lock()
	j.vnetOK[infraJail] = true
	j.mu.Unlock()
	return nil
}

// Start implements Runtime.
func (j *Jails) Start(ctx context.Context, id string) error {
	rec, ok, err := j.Startable(ctx, id)
	if !ok || err != nil {
		return err
	}
	boot, err := j.bootTime(ctx)
	if err != nil {
		return err
	}
	dir := j.records.Path(id)
	lock, err := j.NewRun(ctx, id, boot)
	if err != nil {
		return err
	}
	defer lock.Close() // after the run has its exit record or its supervisor
	failed := func(code int, err error) error {
		WriteJSON(filepath.Join(dir, ExitFile), ExitInfo{Code: code, FinishedAt: j.clock.Now(), Message: err.Error()})
		return fmt.Errorf("start %s: %w", id, err)
	}
	if rec.MountBoot != boot { // a reboot dropped the mounts
		if err := j.mountAll(ctx, rec); err != nil {
			return failed(255, err)
		}
		rec.MountBoot = boot
		if err := j.records.Put(rec); err != nil {
			return failed(255, err)
		}
	}
	if rec.Spec.Pod != "" {
		if err := j.checkVnet(ctx, rec.Spec.Pod); err != nil {
			return failed(255, err)
		}
	}
	args := []string{"-c", "name=" + rec.Jail, "path=" + rec.Spec.Root.Path, "host.hostname=" + id,
		"persist", "ip4=inherit", "ip6=inherit", "devfs_ruleset=" + strconv.Itoa(DevfsRuleset)}
	args = append(args, paramArgs(rec.Params)...)
	_, err = j.run(ctx, "jail", args...)
	if sys.IsExit(err, "already exists") {
		// Left by a run whose supervisor died before removing it.
		if err := j.removeJail(ctx, rec.Jail); err != nil {
			return failed(255, err)
		}
		_, err = j.run(ctx, "jail", args...)
	}
	if err != nil {
		return failed(255, fmt.Errorf("create jail %s: %w", rec.Jail, err))
	}
	if err := j.readBack(ctx, rec.Jail, rec.Params); err != nil {
		j.removeJail(ctx, rec.Jail)
		return failed(255, fmt.Errorf("%w: pod refused: %w", ErrPermanent, err))
	}
	if err := AddRctl(ctx, j.cfg.Runner, rec.Jail, rec.Spec.Resources); err != nil {
		j.removeJail(ctx, rec.Jail)
		return failed(255, err)
	}
	defer j.Launching(ctx, rec)()
	// Launch bounds its own wait by ShimStartTimeout and takes no context:
	// cut short, it would leave a supervisor whose start no record holds.
	if code, reason := j.cfg.Launch(j.cfg.Shim, dir, lock); code != 0 {
		j.removeJail(ctx, rec.Jail)
		if code == ShimExitPermanent {
			return failed(127, fmt.Errorf("%w: %s", ErrPermanent, reason))
		}
		return failed(255, errors.New(reason))
	}
	j.Emit(EventStarted, rec.Spec, 0)
	return nil
}
