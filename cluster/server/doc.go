// Package server is a manager's gRPC port (default 7470): the Objects API
// over the replicated store, the Cluster service (init, join, status,
// join tokens), and the Raft transport between managers, all on one port
// with mutual TLS from the cluster CA.
//
// A daemon starts fresh (no cluster): it then answers only init, join and
// status, and only from its own host. After init or join it serves as a
// manager (or, joined as a worker, serves nothing).
//
// It imports cluster/store, cluster/pki, internal/proto and the object
// model; never cmd, never the client package.
package server
