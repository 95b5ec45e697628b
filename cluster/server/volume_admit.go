package server

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// volumeAllows names the Namespace allow-list entry each driver that
// mounts from elsewhere needs.
var volumeAllows = map[legion.VolumeDriver]string{
	legion.DriverNFS:    legion.AllowNFSVolumes,
	legion.DriverISCSI:  legion.AllowISCSIVolumes,
	legion.DriverPlugin: legion.AllowPluginVolumes,
}

// admitVolumeSources refuses a namespace user's Volume that mounts from
// elsewhere (nfs, iscsi, plugin) when it is new or its source changed,
// unless the user's Namespace lists the driver's entry in
// spec.security.allow. The node mounts such a Volume as root from
// wherever its spec says: any export or LUN the nodes may reach, which
// other teams' Volumes live on, and a plugin takes its options as given.
// A zfs Volume is the namespace's own dataset. The cluster admin's
// Volumes need no entry, and a user keeps one the admin made as it is.
func admitVolumeSources(st *store.Store, a *admission) ([]string, error) {
	if !a.user {
		return nil, nil
	}
	var errs []string
	for _, c := range a.changed {
		v, ok := c.obj.(*legion.Volume)
		if !ok {
			continue
		}
		allow, remote := volumeAllows[v.Spec.Driver]
		if !remote {
			continue
		}
		if old, ok := a.current[legion.ObjectKey(v)].(*legion.Volume); ok && sameSource(&old.Spec, &v.Spec) {
			continue
		}
		ns := v.Metadata.Namespace
		sec, err := a.security(st, ns)
		if err != nil {
			return nil, err
		}
		if slices.Contains(sec.Allow, allow) {
			continue
		}
		errs = append(errs, fmt.Sprintf("Volume %s: spec.driver: %s would have the nodes mount what they can reach, not namespace %s's alone: "+
			"its users may make such Volumes once Namespace %s lists %s in spec.security.allow, which a cluster admin may add (a zfs Volume needs none)",
			legion.DisplayName(v), v.Spec.Driver, ns, ns, allow))
	}
	return errs, nil
}

// sameSource: both Volumes mount the same thing.
func sameSource(a, b *legion.VolumeSpec) bool {
	return a.Driver == b.Driver && reflect.DeepEqual(a.NFS, b.NFS) && reflect.DeepEqual(a.ISCSI, b.ISCSI) && reflect.DeepEqual(a.Plugin, b.Plugin)
}
