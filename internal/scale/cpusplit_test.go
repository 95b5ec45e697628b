package scale

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestCPUSplitTellsManagersFromAgents checks that a CPU profile of the
// harness gives the manager's time to the manager, by its address, and
// the agents' to the agents: the full run reads the leader's cost from
// it. Each round updates every task (work for both sides) inside one
// profile window; a round may be too short for the sampler to land on
// both, so rounds go on until one shows both, within a deadline. Not
// parallel: the profile is the whole process's.
func TestCPUSplitTellsManagersFromAgents(t *testing.T) {
	h := New(t, Options{Managers: 1, Agents: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const replicas = 100
	addr := h.Cluster.Managers[0].Addr
	deadline := time.Now().Add(30 * time.Second)
	for round := 1; ; round++ {
		tag := fmt.Sprintf("%x", round) // hex: the image's digest is made of it
		split, err := StartCPUSplit()
		if err != nil {
			t.Skipf("the CPU profiler is taken (go test -cpuprofile?): %v", err)
		}
		if err := h.Apply(ctx, 1, replicas, tag); err != nil {
			split.Stop()
			t.Fatal(err)
		}
		_, werr := h.WaitFor(ctx, "every task updated", tag, nil, func(c Counts) bool { return c.Running == replicas && c.AtTag == replicas })
		shares, err := split.Stop()
		if werr != nil {
			t.Fatal(werr)
		}
		if err != nil {
			t.Fatal(err)
		}
		for a := range shares.Managers {
			if a != addr {
				t.Fatalf("CPU given to a manager at %s; the only one is at %s", a, addr)
			}
		}
		if shares.Managers[addr] > 0 && shares.Agents > 0 {
			t.Logf("round %d: manager %s, agents %s, other %s", round, shares.Managers[addr], shares.Agents, shares.Other)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d rounds the last profile gave the manager %s and the agents %s (other %s): want both",
				round, shares.Managers[addr], shares.Agents, shares.Other)
		}
	}
}
