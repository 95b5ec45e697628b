// Package controller runs the planner on the leading manager: on every
// store change, at the wake-ups the planner asks for and every five
// seconds, it reads a snapshot of the objects, calls scheduler.Plan and
// writes the result back with version preconditions, so a write computed
// from stale state fails and the next pass recomputes it.
//
// The loop holds no state of its own beyond what the dispatcher tells it
// (heartbeats, usage): a new leader starts it and carries on from the
// store.
package controller
