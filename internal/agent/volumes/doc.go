// Package volumes keeps the data of zfs-driver Volumes on this node: one
// ZFS dataset per Volume on the jails platform, or one directory per
// Volume where ZFS is not used (the process platform, tests). Both
// backends take snapshots, roll back to them, and send and receive a
// Volume as a stream, which is what snapshots before updates, migration
// between nodes and volume backups are built on.
//
// It talks to the managers not at all: the agent calls it. It must not
// import the cluster packages.
package volumes
