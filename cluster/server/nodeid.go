package server

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
)

// MaxNodeIDLength bounds a node id: it names the node's certificate
// record (pki.NodeCertsConfig), an object name of at most
// legion.MaxNameLength characters.
const MaxNodeIDLength = legion.MaxNameLength - len(pki.NodeCertsPrefix)

// reservedNodeIDs are names the cluster gives its own principals.
var reservedNodeIDs = map[string]string{
	"admin": "the cluster admin's certificate",
}

// nodeIDGrammar says what a node id may be, for refusals.
var nodeIDGrammar = fmt.Sprintf("a DNS label of 1 to %d lower-case letters, digits and '-', not starting or ending with '-' (a daemon makes 16 hex digits in <data-dir>/%s)",
	MaxNodeIDLength, NodeIDFile)

// checkNodeID checks that a joining node's proposed id is well formed.
// The id is not echoed when too long, so a refusal stays short.
func checkNodeID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("node_id: missing; expected %s", nodeIDGrammar)
	case len(id) > MaxNodeIDLength:
		return fmt.Errorf("node_id: %d characters, at most %d allowed; expected %s", len(id), MaxNodeIDLength, nodeIDGrammar)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("node_id %q: character %q at %d is not allowed; expected %s", id, c, i, nodeIDGrammar)
		}
	}
	if id[0] == '-' || id[len(id)-1] == '-' {
		return fmt.Errorf("node_id %q: starts or ends with '-'; expected %s", id, nodeIDGrammar)
	}
	if what, ok := reservedNodeIDs[id]; ok {
		return fmt.Errorf("node_id %q: reserved (it names %s)", id, what)
	}
	return nil
}

// errNodeIDTaken means a joining node's id already names a member.
var errNodeIDTaken = errors.New("already in use")

// nodeIDFree checks on the leader's store that no member goes by id: no
// Node, no Raft member (a manager) and no certificate issued for it, so
// a join token never obtains the name of an existing node. The one claim
// it lets pass (again) is a record whose certificates were all issued
// for role to the key of fingerprint key: the join of the node holding
// that key, asked again because its answer was lost (see Join).
func nodeIDFree(st *store.Store, id string, role pki.Role, key string) (again bool, err error) {
	taken := func(by string) (bool, error) {
		return false, fmt.Errorf("node_id %q: %w by %s: a node joins under its own id; on a host whose data directory was copied from another node, remove <data-dir>/%s and start the daemon again to make a new one",
			id, errNodeIDTaken, by, NodeIDFile)
	}
	if _, _, err := st.Get(legion.KindNode, "", id); err == nil {
		return taken("an existing node")
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	f := st.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		return false, fmt.Errorf("reading the managers: %w", err)
	}
	for _, m := range f.Configuration().Servers {
		if m.ID == raft.ServerID(id) {
			return taken("a manager")
		}
	}
	r, _, err := dispatcher.ReadCerts(st, id)
	if err != nil {
		return false, err
	}
	switch {
	case r == nil:
		return false, nil
	case r.Role == role && r.IssuedOnlyTo(key):
		return true, nil
	}
	return taken("a node the cluster already issued a certificate")
}
