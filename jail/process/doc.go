// Package process is a jail.Runtime for hosts without jails: Linux
// development machines and the end-to-end tests. A container is a plain
// process started in its image's unpacked root (chrooted into it when the
// runtime runs as root, else run with the root as its working base), as
// the image's user when root, under a supervisor of its own
// (`legion process-shim`, ShimMain) that survives the daemon. The runtime
// starts the supervisor itself, in a session of its own, so it is the
// daemon's child until it ends (one goroutine, woken by SIGCHLD, reaps
// them all) and init's once the daemon is gone.
//
// It isolates nothing but, where the spec names one (ContainerSpec.NetNS),
// the network: a container then starts, and every exec into it runs, in
// that Linux network namespace, which the daemon makes per pod. Without
// one, members of a pod share the host's network (the loopback network
// gives the pod an address in 127.0.0.0/8). There is no process, user or
// resource isolation. It is a test and development tool; the runtime says
// so when it is made.
//
// State lives in <data-dir>/containers/<id> in package jail's layout
// (record.json, run, exit, log, stop), written by jail.Records and
// jail.Supervisor and kept by an embedded jail.Keeper (statuses, events,
// stop and remove, logs) as the jail runtime's are, so a new Runtime on
// the same data directory finds the running containers again and a run
// from before a reboot counts as over.
//
// It imports only the standard library, golang.org/x/sys and package jail;
// never the object model, the image store or the agent.
package process
