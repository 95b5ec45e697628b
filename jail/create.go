package jail

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
)

// Create implements Runtime.
func (j *Jails) Create(ctx context.Context, spec ContainerSpec) error {
	if spec.Annotations[AnnotationVnet] == "new" {
		spec.Infra = true
	}
	if p := spec.Annotations[AnnotationParentJail]; p != "" && spec.Pod == "" {
		spec.Pod = p
	}
	if err := spec.Validate(); err != nil {
		return err
	}
	if spec.NetNS != "" {
		return fmt.Errorf("container spec %s: netns %q: jails take their network from the pod's VNET jail, not a Linux namespace", spec.ID, spec.NetNS)
	}
	if err := spec.Security.Validate(); err != nil {
		return fmt.Errorf("container spec %s: %w", spec.ID, err)
	}
	if !spec.Infra && !filepath.IsAbs(spec.Root.Path) {
		return fmt.Errorf("container spec %s: root.path %q: expected the absolute path of the prepared root", spec.ID, spec.Root.Path)
	}
	if j.cfg.NoLimits && spec.Resources.Limited() {
		return fmt.Errorf("create %s: %w: no limits on this node (kern.racct.enable)", spec.ID, ErrPermanent)
	}
	var infra Record
	if spec.Pod != "" {
		var err error
		infra, err = j.records.Get(spec.Pod)
		if err != nil || !infra.Spec.Infra {
			return fmt.Errorf("create %s: pod %s: %w", spec.ID, spec.Pod, ErrNotFound)
		}
	}
	boot, err := j.bootTime(ctx)
	if err != nil {
		return err
	}
	rec := Record{Spec: spec, Jail: jailName(spec), CreatedAt: j.clock.Now()}
	if spec.Infra {
		rec.Params = InfraParams([]Security{spec.Security})
	} else {
		rec.Params = ContainerParams(spec.Security, spec.Pod != "")
	}
	if err := j.records.Create(rec); err != nil {
		return err
	}
	fail := func(err error) error {
		j.records.Remove(spec.ID)
		return err
	}
	if spec.Infra {
		if err := j.createInfra(ctx, rec); err != nil {
			return fail(err)
		}
		rec.MountBoot = boot
	} else {
		if spec.Pod != "" {
			if err := j.widenInfra(ctx, infra, spec.Security); err != nil {
				return fail(err)
			}
		}
		if err := j.mountAll(ctx, rec); err != nil {
			return fail(err)
		}
		rec.MountBoot = boot
	}
	if err := j.records.Put(rec); err != nil {
		return fail(err)
	}
	j.Emit(EventCreated, spec, 0)
	return nil
}

// createInfra makes a pod's jail: persistent, its own VNET, on /var/empty
// so it never sees the host's files, with no process; and checks it.
func (j *Jails) createInfra(ctx context.Context, rec Record) error {
	args := []string{"-c", "name=" + rec.Jail, "persist", "vnet=new", "path=/var/empty",
		"host.hostname=" + rec.Spec.ID, "children.max=" + strconv.Itoa(j.cfg.ChildrenMax)}
	args = append(args, paramArgs(rec.Params)...)
	if _, err := j.run(ctx, "jail", args...); err != nil {
		return fmt.Errorf("create pod jail %s: %w", rec.Jail, err)
	}
	want := append([]Param{{"vnet", "new"}}, rec.Params...)
	if err := j.readBack(ctx, rec.Jail, want); err != nil {
		j.removeJail(ctx, rec.Jail)
		return fmt.Errorf("pod %s refused: %w", rec.Spec.ID, err)
	}
	j.mu.Lock()
	j.vnetOK[rec.Jail] = true
	j.mu.Unlock()
	return nil
}

// widenInfra gives the pod's jail what a new member asks for on top of
// what its members have: a child may have only what its parent has.
func (j *Jails) widenInfra(ctx context.Context, infra Record, add Security) error {
	j.podMu.Lock() // one read-modify-write of a pod's parameters at a time
	defer j.podMu.Unlock()
	if fresh, err := j.records.Get(infra.Spec.ID); err == nil {
		infra = fresh
	}
	secs := []Security{infra.Spec.Security, add}
	ids, err := j.records.IDs()
	if err != nil {
		return err
	}
	for _, id := range ids {
		if r, err := j.records.Get(id); err == nil && r.Spec.Pod == infra.Spec.ID {
			secs = append(secs, r.Spec.Security)
		}
	}
	want := InfraParams(secs)
	var changed []Param
	for i, p := range want {
		if i >= len(infra.Params) || infra.Params[i] != p {
			changed = append(changed, p)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	args := append([]string{"-m", "name=" + infra.Jail}, paramArgs(changed)...)
	if _, err := j.run(ctx, "jail", args...); err != nil {
		return fmt.Errorf("loosen pod jail %s for a member: %w", infra.Jail, err)
	}
	if err := j.readBack(ctx, infra.Jail, want); err != nil {
		return fmt.Errorf("pod %s refused: %w", infra.Spec.ID, err)
	}
	infra.Params = want
	return j.records.Put(infra)
}
