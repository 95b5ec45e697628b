// Package resolver is the node's DNS resolver: it answers the cluster's
// names under "legion." from a zone file the agent rewrites as endpoints
// change, and forwards every other name to the host's resolvers, keeping
// their answers for as long as their TTL says.
//
// It runs as a process of its own (legion node-resolver) so pods' lookups
// go on while the daemon restarts, from the last zone written. Cluster
// answers are authoritative with a 5-second TTL; unknown names under
// "legion." are NXDOMAIN and never leave the node; answers too large for
// UDP are truncated so the client retries over TCP.
//
// The zone is built by a pure function (BuildZone) from the services and
// their endpoints; the server only reads it. This package imports the
// standard library and miekg/dns, nothing of the agent or the store.
package resolver
