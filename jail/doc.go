// Package jail is Legion's container runtime contract and its FreeBSD
// implementation.
//
// The contract (Runtime, ContainerSpec, ContainerStatus, Event, Usage,
// ExecSpec) is what the node agent drives; it speaks only of observable
// behaviour (labels, states, exit codes, logs, stop grace) so a runtime made
// of plain processes can implement it too. Package jailtest holds the
// conformance suite every implementation must pass, and an in-memory
// runtime for tests of the agent.
//
// The FreeBSD runtime (Jails) runs pods as jails: a persistent VNET jail per
// pod with no process, and each container a child jail on its prepared
// root, supervised by `legion jail-shim` (ShimMain). Every FreeBSD command
// goes through sys's Runner, so the command lines are tested on any
// host; file-system work (records, mount targets, logs) is portable Go.
//
// Where things are: runtime.go (the contract); keeper.go (Keeper, the
// bookkeeping on the records both this runtime and package process embed:
// statuses, events, stop and remove, logs); the jail runtime in jails.go
// (its configuration and helpers), create.go, mounts.go, start.go,
// stop.go, remove.go, find.go, exec.go, limits.go (usage and the OOM
// killer's list) and adopt.go; security.go (profiles and read-back),
// rctl.go and memacct.go (limits and the memory count of 6.3; vmmap.go
// decodes the kernel's records for it), modules.go (start-up, Linux ABI),
// records.go (<data-dir>/jails/<id>), safepath.go (mount targets);
// supervisor.go, shim.go (ShimFront: Start, which starts a supervisor as
// this process's child and relays its report, and the supervise mode,
// both shared by jail-shim and process-shim), reaper.go (reaps those
// children), passwd.go and pty_*.go (the supervisor);
// logrecord.go (log records, rotation, follow).
//
// This package imports only the standard library, sys and
// golang.org/x/sys. It must not import the legion object model, the image
// store or the agent: an image-build tool imports it on its own.
package jail
