// Package probe runs one container's startup, liveness and readiness
// probes (TCP connect, HTTP 2xx/3xx, gRPC health, exec) on the timing its
// legion.Probe gives, and reports only transitions: readiness turning on
// or off, liveness failing or recovering, startup passing or failing.
//
// Network probes go from the host to the pod's address; exec probes run
// in the container through a small Execer the agent backs with its
// runtime's Exec. A startup probe holds the other two back until it
// passes; a container without a readiness probe is ready once started.
//
// It imports the object model (for legion.Probe and named ports), grpc's
// health client and the standard library; never the runtime or the agent,
// which consume it.
package probe
