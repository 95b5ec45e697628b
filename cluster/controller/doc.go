// Package controller runs the planner on the leading manager: on every
// change to a kind it plans from, at the wake-ups the planner asks for
// and every five seconds, it reads a snapshot of the objects, calls
// scheduler.Plan and writes the result back with version preconditions
// (and, for tasks, the owner the plan read), so a write computed from
// stale state fails and the next pass recomputes it. It writes nothing
// that would leave an object as it is: every write wakes the watchers,
// the loop included when the write is of a kind it plans from.
//
// The loop holds no state of its own beyond what the dispatcher tells it
// (heartbeats, usage): a new leader starts it and carries on from the
// store, as a Cache that every manager keeps from the store's events
// holds it, so the first pass of a term reads nothing. The image
// resolver keeps only its failed owners' retry times.
package controller
