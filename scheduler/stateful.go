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
			name := claimName(pv.Name, o.key.name, n)
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
				c := *v
				c.Spec.Size = pv.Claim.Size
				p.volumes[key] = &c
				p.res.UpdateVolumes = append(p.res.UpdateVolumes, &c)
			}
		}
	}
}
