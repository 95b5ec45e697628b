package legion

import "time"

// Volume is storage tasks mount: a ZFS dataset on one node, an NFS
// export, an iSCSI LUN or a plugin's.
type Volume struct {
	Header
	Spec   VolumeSpec   `json:"spec"`
	Status VolumeStatus `json:"status,omitzero"`
}

// VolumeDriver is where a Volume's data lives.
type VolumeDriver string

// Volume drivers.
const (
	DriverZFS    VolumeDriver = "zfs"
	DriverNFS    VolumeDriver = "nfs"
	DriverISCSI  VolumeDriver = "iscsi"
	DriverPlugin VolumeDriver = "plugin"
)

// VolumeSpec is what the user asks of a volume.
type VolumeSpec struct {
	Driver VolumeDriver  `json:"driver"`
	Size   Bytes         `json:"size,omitempty"` // zfs: the dataset's quota
	Node   string        `json:"node,omitempty"` // zfs: where its data should be
	NFS    *NFSVolume    `json:"nfs,omitempty"`
	ISCSI  *ISCSIVolume  `json:"iscsi,omitempty"`
	Plugin *PluginVolume `json:"plugin,omitempty"`
}

// NFSVolume is an export every task may share.
type NFSVolume struct {
	Server  string `json:"server"`
	Path    string `json:"path"`
	Options string `json:"options,omitempty"` // mount options; nfsv4 unless they say otherwise
}

// ISCSIVolume is a LUN holding UFS, used by one node at a time.
type ISCSIVolume struct {
	Portal string `json:"portal"`
	Target string `json:"target"`
	LUN    int    `json:"lun"`
}

// PluginVolume is mounted by an executable on the node.
type PluginVolume struct {
	Name    string            `json:"name"`
	Options map[string]string `json:"options,omitempty"`
	Shared  bool              `json:"shared"`
}

// VolumeStatus is where a volume's data is and whether it is moving.
type VolumeStatus struct {
	Node      string           `json:"node,omitempty"`
	Migration *VolumeMigration `json:"migration,omitempty"`
	Snapshots []string         `json:"snapshots,omitempty"`
	Message   string           `json:"message,omitempty"`
}

// VolumeMigration is a move of a ZFS volume between nodes.
type VolumeMigration struct {
	State       string     `json:"state"` // copying, finishing
	From        string     `json:"from"`
	To          string     `json:"to"`
	Attempt     int        `json:"attempt,omitempty"`
	NextAttempt *time.Time `json:"nextAttempt,omitempty"`
	Message     string     `json:"message,omitempty"`
}

// Shared reports whether tasks on several nodes may use the volume at once.
func (v *VolumeSpec) Shared() bool {
	switch v.Driver {
	case DriverNFS:
		return true
	case DriverPlugin:
		return v.Plugin != nil && v.Plugin.Shared
	}
	return false
}
