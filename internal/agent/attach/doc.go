// Package attach mounts the Volumes whose data lives off the node (NFS
// exports, iSCSI LUNs holding UFS, and plugin-provided file systems) for
// the tasks that use them, and undoes those mounts at teardown (spec 6.7).
//
// Every attach is written to attached.json in the task's directory before
// anything is mounted, so a teardown after a failed start or an agent
// restart finds what to undo. FreeBSD commands go through the system
// runner; plugins are executables of the operator's, run with os/exec.
//
// It belongs to the node agent and imports only the object model and the
// system runner.
package attach
