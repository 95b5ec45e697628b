package scheduler

import (
	"strconv"

	"github.com/legionbsd/legion"
)

// LabelOrdinal marks a claim's Volume with the stateful ordinal it serves.
const LabelOrdinal = "legion.ordinal"

// claimVolumes makes the Volume of every claim for every wanted ordinal,
// <claim>-<service>-<n>, and resizes it with the claim. Volumes of ordinals
// no longer wanted are kept: their data outlives the task.
func (p *planner) claimVolumes(o *owner, wanted int) {
	for n := 0; n < wanted; n++ {
		for _, pv := range o.pod.Volumes {
			if pv.Claim == nil {
				continue
			}
			name := ClaimName(pv.Name, o.key.name, n)
			key := nsName{o.key.ns, name}
			v := p.volumes[key]
			if v == nil {
				v = &legion.Volume{
					Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindVolume,
						Metadata: legion.Metadata{Name: name, Namespace: o.key.ns,
							Labels: map[string]string{LabelService: o.key.name, LabelOrdinal: strconv.Itoa(n)}}},
					Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: pv.Claim.Size},
				}
				p.volumes[key] = v
				p.res.CreateVolumes = append(p.res.CreateVolumes, v)
				continue
			}
			if v.Spec.Size != pv.Claim.Size && v.Spec.Driver == legion.DriverZFS {
				p.volMut(key).Spec.Size = pv.Claim.Size
			}
		}
	}
}

// updateSnapshot is what a task of a stateful service's update does to its
// claimed Volumes before it starts (4.3): take the update's snapshot, or,
// for a rollback's task, restore it. Nil outside an update that asked for
// snapshots.
func updateSnapshot(o *owner, u *legion.UpdateStatus) *legion.TaskSnapshot {
	if !o.stateful || u == nil || u.Snapshot == "" {
		return nil
	}
	switch u.State {
	case legion.UpdateUpdating, legion.UpdatePaused:
		return &legion.TaskSnapshot{Name: u.Snapshot}
	case legion.UpdateRollingBack, legion.UpdateRollbackPaused:
		return &legion.TaskSnapshot{Name: u.Snapshot, Restore: true}
	}
	return nil
}

// slotSnapshot is the snapshot a new task of the slot gets: only in a slot
// the update (or its rollback) reached, one that ran another pod before;
// a new ordinal has nothing to keep. A rollback restores once per slot, as
// the restore drops the snapshot and a later restart keeps its data.
func slotSnapshot(o *owner, s *slot) *legion.TaskSnapshot {
	if o.snap == nil {
		return nil
	}
	reached := false
	for _, e := range s.entries {
		if e.deleted {
			continue
		}
		if e.t.Spec.PodHash != o.hash {
			reached = true
		}
		if o.snap.Restore && e.t.Spec.Snapshot != nil && *e.t.Spec.Snapshot == *o.snap {
			return nil
		}
	}
	if !reached {
		return nil
	}
	return o.snap
}
