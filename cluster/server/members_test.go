package server_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/testcluster"
)

// failoverBound is how soon, after the leader dies, the cluster must
// have a new leader that accepts a write.
const failoverBound = 10 * time.Second

func config(name string) legion.Object {
	o, _ := legion.New(legion.KindConfig)
	c := o.(*legion.Config)
	c.Metadata.Name, c.Metadata.Namespace = name, legion.DefaultNamespace
	c.Spec.Data = []byte(name)
	return c
}

// suffrage is what st's Raft configuration says of node: whether it is a
// member, and a voter.
func suffrage(t *testing.T, st *store.Store, node string) (member, voter bool) {
	t.Helper()
	f := st.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	for _, m := range f.Configuration().Servers {
		if string(m.ID) == node {
			return true, m.Suffrage == raft.Voter
		}
	}
	return false, false
}

// adminOf is a client with the admin's credentials to addr, retrying
// UNAVAILABLE for retry.
func adminOf(t *testing.T, addr, credentials string, retry time.Duration) *client.Client {
	t.Helper()
	cl, err := client.New(client.Options{Server: addr, CredentialsFile: credentials, Retry: retry})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// A join of a manager returns once it votes, so a leader killed at once
// after two joins leaves a quorum: twenty runs in a row elect a new leader
// that accepts a write within 10 s.
func TestLeaderKilledRightAfterTwoJoinsLeavesAQuorum(t *testing.T) {
	t.Parallel()
	for run := range 20 {
		t.Run(fmt.Sprint(run), func(t *testing.T) {
			ms := []*testcluster.Manager{}
			for range 3 {
				ms = append(ms, testcluster.StartManager(t, t.TempDir(), testcluster.FreeAddr(t), nil))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			first := ms[0]
			if _, err := first.Bare().Init(ctx); err != nil {
				t.Fatal(err)
			}
			admin := filepath.Join(first.Dir, server.AdminFile)
			tok, err := adminOf(t, first.Addr, admin, time.Second).Token(ctx, "manager")
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms[1:] {
				if _, err := m.Bare().JoinCluster(ctx, tok, first.Addr, "manager"); err != nil {
					t.Fatalf("joining %s: %v", m.Addr, err)
				}
				// Returned: it votes, as far as it knows itself.
				if member, voter := suffrage(t, m.Store(), m.Server.NodeID()); !member || !voter {
					t.Fatalf("join of %s returned with it member=%v voter=%v", m.Addr, member, voter)
				}
			}
			killed := time.Now()
			first.Kill()
			wctx, wcancel := context.WithDeadline(ctx, killed.Add(failoverBound))
			defer wcancel()
			cl := adminOf(t, ms[1].Addr, admin, failoverBound)
			if _, err := cl.ApplyOne(wctx, config("after-kill"), client.ApplyOptions{}); err != nil {
				t.Fatalf("no write accepted within %s of the leader's death: %v", failoverBound, err)
			}
			t.Logf("a write accepted %s after the kill", time.Since(killed).Round(time.Millisecond))
		})
	}
}
