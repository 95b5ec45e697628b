// Package loopback is the network Legion uses on hosts without jails and
// pf (development machines and the end-to-end tests): pods and VIPs take
// addresses in 127.0.0.0/8, and each VIP port is served by a userspace TCP
// proxy balancing round-robin over the service's ready endpoints.
//
// It isolates nothing: every pod shares the host's network stack. The
// daemon says so when it starts with it. On FreeBSD the agent uses the
// pf network of package netbsd instead.
package loopback
