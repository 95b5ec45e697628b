// Package metrics is what a manager reports to Prometheus: the gRPC calls
// it answered, its Raft state (hashicorp/raft's own metrics bridged from
// go-metrics, plus what raft does not count) and, on the leader only, the
// cluster as the store holds it. Everything goes to a registry the caller
// owns, never Prometheus's global one; the daemon serves it over HTTP.
//
// It reads the store and nothing of the node side.
package metrics
