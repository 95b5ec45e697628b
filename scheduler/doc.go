// Package scheduler is the leader's planner: one pure, deterministic
// function from a snapshot of the cluster (services, jobs, cron jobs,
// tasks, nodes, volumes, namespaces, heartbeats and usage reports) and the
// current time to the writes that converge it, and the earliest time it
// must run again.
//
// Plan covers every rule of the service controller and the scheduler:
// slots and task naming, replacement with backoff, history, rolling updates
// and rollbacks, drain and pause, disruption budgets, taints, filters and
// scores, pending messages, namespace quotas, jobs, cron jobs, autoscaling
// and node health. It does no I/O, reads no clock, starts no goroutines and
// leaks no map order into its output, so the same input gives the same
// writes and the controller loop that calls it (package cluster) can be
// tested apart from it.
//
// It imports only the standard library, the object model (package legion)
// and the cron expression parser; a test over `go list -deps` checks it.
// Package schedtest holds a harness that runs Plan against simulated agents
// and a fake clock.
package scheduler
