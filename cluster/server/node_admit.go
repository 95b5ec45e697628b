package server

import (
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// admitNodeRoles refuses a change to a Node's spec.role. The role is how
// the node joined: a manager holds a manager's certificate, the Raft
// log and the CA key, a worker none of them, and nothing acts on the
// field. Stored changed, it would only mislead: node ls would list a
// worker as a manager, and a node.role == manager constraint would
// place tasks on it. (docker node update --role is that habit.)
func admitNodeRoles(_ *store.Store, a *admission) ([]string, error) {
	var errs []string
	for _, c := range a.changed {
		n, ok := c.obj.(*legion.Node)
		if !ok {
			continue
		}
		cur, ok := a.current[legion.ObjectKey(c.obj)].(*legion.Node)
		if !ok || cur.Spec.Role == n.Spec.Role {
			continue
		}
		how := "a worker becomes a manager only by having its Node deleted (legion delete node " + n.Metadata.Name +
			") and joining again with the manager token from an empty data directory"
		if cur.Spec.Role == legion.RoleManager {
			how = "a manager stops being one only by being deleted (legion delete node " + n.Metadata.Name +
				"); legion node demote " + n.Metadata.Name + " takes its vote and keeps it a manager"
		}
		errs = append(errs, fmt.Sprintf("Node %s: spec.role: %s: a node's role is the one it joined with (%s), not set by its spec: %s",
			n.Metadata.Name, n.Spec.Role, cur.Spec.Role, how))
	}
	return errs, nil
}
