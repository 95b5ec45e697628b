// Package sessions is the agent's side of sessions (spec 3.8 "Sessions"):
// it keeps a Sessions stream open with every manager, so any manager can
// reach this node without a port open on it, and answers each offer by
// attaching to the manager that made it and sending what the session
// asks for. Only logs are served: the container's log as the runtime
// gives it, or, once the pod is gone, the output the agent saved.
//
// It reads logs through a function (jail.Runtime.Logs is one) and must not
// import the cluster packages or a concrete runtime.
package sessions
