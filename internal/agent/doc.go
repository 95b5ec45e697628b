// Package agent is the node agent: it follows the tasks the managers
// assign to its node and runs each as a pod through a jail.Runtime (the
// jail runtime on FreeBSD, the process runtime elsewhere), pulling images,
// writing secrets and configs, applying restart policies and reporting
// every task's state back.
//
// It persists nothing the runtime cannot tell it again: every container
// carries the labels legion.task.id and legion.node.id, so after a restart
// the agent adopts the pods it finds instead of starting them anew.
//
// The agent talks to the managers through the Manager interface, so the
// same executor runs behind the gRPC dispatcher and in-process in tests.
package agent
