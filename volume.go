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
	// Node holds the data: set by the first claim of a ZFS Volume and kept
	// until it moves or the node is removed; for iSCSI and unshared plugin
	// Volumes only while the node's tasks use it.
	Node string `json:"node,omitempty"`
	// Backend is how Node keeps the data, as its agent said when claiming
	// ("zfs dataset tank/legion/volumes/shop/db", "directory /var/...").
	Backend   string           `json:"backend,omitempty"`
	Migration *VolumeMigration `json:"migration,omitempty"`
	// Snapshots are those of Node's copy, as its agent said when a task
	// of the node last began to use the Volume (and again if the task's
	// snapshot step changed them); none are known before then.
	Snapshots []string `json:"snapshots,omitempty"`
	Message   string   `json:"message,omitempty"`
}

// VolumeState is a Volume's standing as `legion volume ls` shows it.
type VolumeState string

// Volume states.
const (
	VolumeFree   VolumeState = "free"   // no node holds it
	VolumeBound  VolumeState = "bound"  // its data is on Status.Node
	VolumeMoving VolumeState = "moving" // a migration is under way
)

// State says whether the volume is free, bound or moving.
func (v *Volume) State() VolumeState {
	switch {
	case v.Status.Migration != nil:
		return VolumeMoving
	case v.Status.Node != "":
		return VolumeBound
	}
	return VolumeFree
}

// Migration states, in order (4.3): the leader's planner records a move as
// copying; the migrator marks it copied once the full copy is on the new
// node, which lets the drain stop the tasks using it on the old node; with
// none left there the planner marks it finishing, and the migrator sends
// the last part, binds the Volume to the new node and clears the
// migration.
const (
	MigrationCopying   = "copying"
	MigrationCopied    = "copied"
	MigrationFinishing = "finishing"
)

// VolumeBackupHeader is the first line of a volume backup file (4.3),
// before the data stream; a restore takes the Volume's labels and spec
// from it.
type VolumeBackupHeader struct {
	Format      string            `json:"format"` // VolumeBackupFormat
	Namespace   string            `json:"namespace"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Spec        VolumeSpec        `json:"spec"`
	Node        string            `json:"node"`    // where it was taken; on restore, where it goes
	Backend     string            `json:"backend"` // the stream's form: "zfs" (zfs send) or "dir" (tar)
	Time        time.Time         `json:"time"`
	Consistency string            `json:"consistency"` // ConsistencyCrash or ConsistencyFiles
}

// What a Volume backup's data is as of (VolumeBackupHeader.Consistency).
const (
	// ConsistencyCrash: the data at one instant while its tasks ran (a
	// ZFS snapshot), as after a power cut.
	ConsistencyCrash = "crash"
	// ConsistencyFiles: copied file after file while its tasks ran (a
	// directory has no atomic snapshot).
	ConsistencyFiles = "files"
)

// RestoredVolumeUID stands for the uid of a Volume on the node's copy of
// data a restore sent before the leader made the Volume (its uid is known
// only then): the node's first use of the copy for the Volume takes it as
// that Volume's, and the leader names it to drop data it refused.
const RestoredVolumeUID = "restored"

// VolumeBackupFormat names the backup file's format and version.
const VolumeBackupFormat = "legion-volume-backup/1"

// VolumeMigration is a move of a ZFS volume between nodes.
type VolumeMigration struct {
	State       string     `json:"state"` // copying, copied, finishing
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
