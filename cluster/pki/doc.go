// Package pki is the cluster's certificate authority and join tokens: a
// P-256 root CA made at init, node and admin certificates (90 days) issued
// from certificate requests, the TLS configurations of mutual TLS between
// managers, agents and the CLI, and tokens LGN-1-<ca-digest>-<secret>
// whose digest lets a joining node check the cluster it reaches before it
// sends anything.
//
// It also seals a manager's private keys under an autolock unlock key
// (keyseal.go). It imports only the standard library and x/crypto's
// ChaCha20-Poly1305: no store, no gRPC.
package pki
