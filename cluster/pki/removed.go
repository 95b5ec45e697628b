package pki

import (
	"crypto/x509"
	"encoding/json"
	"fmt"
	"time"
)

// RemovedNodesConfig names the Config of the reserved namespace that
// records when nodes were removed, as JSON (RemovedNodes).
const RemovedNodesConfig = "removed-nodes"

// Recheck is how often an open stream checks that its caller still stands
// (a node not removed, a user still bound), so that a revocation ends
// the stream within 5 s, replication included.
const Recheck = 2 * time.Second

// RemovedNodes records the nodes removed from the cluster. A node's
// certificate record is dropped when it is removed, so one that joins
// again under the same name starts a new record; a certificate naming a
// removed node is accepted only if that new record holds it.
type RemovedNodes struct {
	Nodes map[string]Removal `json:"nodes"`
}

// Removal is when a node was removed, and until when a certificate issued
// before could still be presented (the latest expiry among them): the
// entry is dropped after that.
type Removal struct {
	At    time.Time `json:"at"`
	Until time.Time `json:"until"`
}

// ParseRemovedNodes reads the record; empty data is an empty record.
func ParseRemovedNodes(data []byte) (*RemovedNodes, error) {
	r := &RemovedNodes{}
	if len(data) > 0 {
		if err := json.Unmarshal(data, r); err != nil {
			return nil, fmt.Errorf("removed nodes: expected JSON {nodes: {name: {at, until}}}: %w", err)
		}
	}
	if r.Nodes == nil {
		r.Nodes = map[string]Removal{}
	}
	return r, nil
}

// Marshal encodes the record.
func (r *RemovedNodes) Marshal() ([]byte, error) { return json.Marshal(r) }

// Add records node's removal at, keeping a later Until of an earlier
// removal (its certificates are no less valid for it).
func (r *RemovedNodes) Add(node string, at, until time.Time) {
	if old, ok := r.Nodes[node]; ok && old.Until.After(until) {
		until = old.Until
	}
	r.Nodes[node] = Removal{At: at, Until: until}
}

// Prune drops the entries no certificate issued before could outlive.
func (r *RemovedNodes) Prune(now time.Time) {
	for n, e := range r.Nodes {
		if now.After(e.Until) {
			delete(r.Nodes, n)
		}
	}
}

// Refuses reports whether leaf, naming a removed node, was issued before
// the removal: the node's current certificate record (nil if none) does
// not hold it. It returns the removal for the refusal's message.
func (r *RemovedNodes) Refuses(leaf *x509.Certificate, record *NodeCerts) (Removal, bool) {
	if r == nil {
		return Removal{}, false
	}
	e, ok := r.Nodes[IdentityOf(leaf).Name]
	if !ok {
		return Removal{}, false
	}
	if record != nil && record.Holds(leaf) {
		return e, false
	}
	return e, true
}

// RemovedMessage says why a removed node's certificate is refused.
func RemovedMessage(leaf *x509.Certificate, e Removal) string {
	id := IdentityOf(leaf)
	return fmt.Sprintf("node %s was removed from the cluster at %s: its certificate (serial %s) was issued before and is refused; join again with a token",
		id.Name, e.At.UTC().Format(time.RFC3339), leaf.SerialNumber.Text(16))
}
