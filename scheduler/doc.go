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
// A pass is linear in the tasks: they are filed once by owner and slot
// (small slot numbers index a slice, nothing is hashed or sorted per task)
// with the few fields every later step reads copied beside them, and the
// node counters (requests, host ports, an owner's tasks per node and per
// spread group) are updated as tasks are placed. Placement filters each
// node once per distinct placement, not per task, and ranks candidates by
// spread group first, so a task scans only the nodes of the best groups.
// The benchmarks in bench_test.go hold it to 20,000 tasks on 256 nodes.
//
// It imports only the standard library, the object model (package legion)
// and the cron expression parser; a test over `go list -deps` checks it.
// Package schedtest holds a harness that runs Plan against simulated agents
// and a fake clock.
package scheduler
