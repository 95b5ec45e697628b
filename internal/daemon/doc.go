// Package daemon composes a Legion node from the library's parts: the
// manager (store, API, controller loop) and the agent with its runtime,
// image store and network. cmd/legion's daemon and up commands are thin
// wrappers around it.
package daemon
