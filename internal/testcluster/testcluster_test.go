package testcluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
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

// failedTest is a test that has failed, keeping what is logged on it.
type failedTest struct {
	*testing.T
	mu   sync.Mutex
	logs []string
}

func (f *failedTest) Failed() bool { return true }
func (f *failedTest) Log(args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprint(args...))
}
func (f *failedTest) Logf(format string, args ...any) { f.Log(fmt.Sprintf(format, args...)) }

// A test that fails says where the cluster stood: its nodes and tasks.
func TestAFailedTestLogsTheClusterState(t *testing.T) {
	t.Parallel()
	var f *failedTest
	t.Run("failing", func(t *testing.T) {
		f = &failedTest{T: t}
		c := testcluster.New(f, testcluster.Options{})
		tk := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
			Metadata: legion.Metadata{Name: "web-1-1", Namespace: legion.DefaultNamespace}}}
		tk.Spec.Node, tk.Spec.DesiredState = "n1", legion.TaskRunning
		tk.Status.State, tk.Status.Message = legion.TaskFailed, "pulling web:1: not found"
		if _, _, err := c.Managers[0].Store().Put(context.Background(), tk, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	got := strings.Join(f.logs, "\n")
	want := `task default/web-1-1 node=n1 desired=running state=failed ready=false restarts=0 "pulling web:1: not found"`
	if !strings.Contains(got, "cluster state at the failure") || !strings.Contains(got, want) {
		t.Fatalf("a failed test logged:\n%s\nwant the task's line: %s", got, want)
	}
}
