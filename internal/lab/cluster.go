package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/metadata"
)

// pollEvery is how often the lab's waits look again.
const pollEvery = 100 * time.Millisecond

// statusTimeout bounds a status call.
const statusTimeout = 3 * time.Second

// Status asks n's daemon for its status, within statusTimeout. It asks as
// one manager probing another does, so the manager answers from its own
// Raft state at once instead of first probing the others for up to a
// second each, which a partition makes it do.
func (l *Lab) Status(n *Node) (client.Status, error) {
	c, err := client.New(client.Options{Server: n.Endpoint(), CredentialsFile: l.Admin(), Retry: -1})
	if err != nil {
		return client.Status{}, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), statusTimeout)
	defer cancel()
	return c.Status(metadata.AppendToOutgoingContext(ctx, "legion-forwarded", "lab"))
}

// Leader is the manager that says it leads, in the highest term any
// manager that answers reports.
func (l *Lab) Leader() (*Node, client.Status, error) {
	var best *Node
	var bestSt client.Status
	for _, n := range l.Managers() {
		st, err := l.Status(n)
		if err != nil || st.State != "Leader" {
			continue
		}
		if best == nil || st.Term > bestSt.Term {
			best, bestSt = n, st
		}
	}
	if best == nil {
		return nil, client.Status{}, fmt.Errorf("no manager says it leads")
	}
	return best, bestSt, nil
}

// WaitFor polls cond until it holds or timeout passes.
func WaitFor(timeout time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %v", what, timeout)
		}
		time.Sleep(pollEvery)
	}
	return nil
}

// WaitFormed waits until a leader has every manager as a voter, every
// manager follows it in its term, and every node is ready.
func (l *Lab) WaitFormed(timeout time.Duration) error {
	return WaitFor(timeout, "every manager a voter and every node ready", func() bool {
		leader, st, err := l.Leader()
		if err != nil {
			return false
		}
		voters := 0
		for _, m := range st.Members {
			if m.Voter {
				voters++
			}
		}
		if voters != len(l.Managers()) {
			return false
		}
		for _, m := range l.Managers() {
			if mst, err := l.Status(m); err != nil || mst.LeaderID != leader.ID || mst.Term != st.Term {
				return false
			}
		}
		states, err := l.NodeStates(leader)
		if err != nil {
			return false
		}
		for _, n := range l.Nodes {
			if states[n.ID] != legion.NodeReady {
				return false
			}
		}
		return true
	})
}

// NodeStates are the nodes' states (by node id) as the manager via says.
func (l *Lab) NodeStates(via *Node) (map[string]legion.NodeState, error) {
	c, err := client.New(client.Options{Server: via.Endpoint(), CredentialsFile: l.Admin(), Retry: -1})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	objs, _, err := c.List(ctx, legion.KindNode, client.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]legion.NodeState{}
	for _, o := range objs {
		if n, ok := o.(*legion.Node); ok {
			out[n.Metadata.Name] = n.Status.State
		}
	}
	return out, nil
}
