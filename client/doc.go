// Package client is the Go client of a Legion cluster: typed Apply, Get,
// List, Delete and Watch over the object model, a list-then-watch helper
// that lists again when a watch is compacted or reset, sessions (a task's
// logs, exec with a terminal, port-forward), and the cluster calls (init,
// join, status, join tokens, users). Every CLI command uses it, and it
// hands back only its own types and the object model's.
//
// Single calls retry UNAVAILABLE (an election, a manager restarting) for
// up to 30 s; streams do not.
//
// It imports the object model, cluster/pki (credentials only) and the
// generated protocol; never the server or the store.
package client
