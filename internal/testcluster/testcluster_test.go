package testcluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/leakcheck"
	"github.com/legionbsd/legion/internal/testcluster"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

func config(name string) legion.Object {
	o, _ := legion.New(legion.KindConfig)
	o.GetMetadata().Name = name
	o.(*legion.Config).Spec.Text = name
	return o
}

// Three managers form one cluster; a killed leader is replaced, a write
// through a survivor lands, and the restarted manager catches up.
func TestThreeManagersSurviveALeaderKill(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3})
	if len(c.Managers) != 3 {
		t.Fatalf("%d managers", len(c.Managers))
	}
	ctx := context.Background()
	if _, err := c.Client().ApplyOne(ctx, config("before"), client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	old := c.WaitLeader()
	old.Kill()
	if old.Store() != nil {
		t.Fatal("a killed manager still has a store")
	}
	leader := c.WaitLeader()
	if leader == old {
		t.Fatal("the killed manager still leads")
	}
	if _, err := c.ClientTo(leader).ApplyOne(ctx, config("after"), client.ApplyOptions{}); err != nil {
		t.Fatalf("write after the kill: %v", err)
	}
	old.Restart()
	testcluster.WaitFor(t, "the restarted manager to hold the later write", settle, func() bool {
		st := old.Store()
		if st == nil {
			return false
		}
		_, _, err := st.Get(legion.KindConfig, "default", "after")
		return err == nil
	})
}

const settle = 20 * time.Second
