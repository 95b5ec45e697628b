// Package testcluster is the one harness for tests that need real
// managers: it starts Legion daemons in-process on loopback with the fast
// Raft timing (store.FastTiming), makes the first one a cluster and joins
// the others, and stops everything when the test ends. It follows Nomad's TestServer: a
// test asks for what it needs in Options and gets running pieces back.
//
// It is for tests only; production code must not import it. The store's
// and the server's own package tests keep small local helpers, as they
// cannot import this package without a cycle.
package testcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/manager"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testpoll"
	"github.com/legionbsd/legion/netbsd/addrplan"
)

// WriteTimeout bounds writes in test clusters: long enough for an
// election under load, short enough that a lost quorum fails a test
// quickly.
const WriteTimeout = 5 * time.Second

// LeaderCheck is how often a manager started with Options.Leader looks
// whether it leads: the leader's work starts soon after an election.
const LeaderCheck = 20 * time.Millisecond

// ProfileLabel is the CPU profile label (runtime/pprof) a manager's
// goroutines carry, its address as the value: goroutines inherit labels
// from the one that starts them, so its store, Raft, gRPC server and
// leader's work are all told apart from the test's own in a profile (the
// scale harness splits the CPU so).
const ProfileLabel = "manager"

// settle bounds how long the harness waits for a cluster to form or
// elect.
const settle = 20 * time.Second

// Options says what cluster a test wants.
type Options struct {
	// Managers is how many managers to start (default 1). The first
	// initialises the cluster; the others join it with the manager token
	// and the call returns once all are voters.
	Managers int
	// Configure, when set, adjusts each manager's configuration (i counts
	// from 0) before it starts, and again on every restart.
	Configure func(i int, c *server.Config)
	// Workers is how many fresh daemons to join with the worker token
	// once the managers are voters; they are in Cluster.Workers. An agent
	// is the test's to run beside them.
	Workers int
	// Leader runs the leader's work (cluster/manager: controllers,
	// planner, allocators) beside every daemon's port, as legion daemon
	// does. Without it a daemon serves the API, the dispatcher and Raft
	// only, and nothing acts on what is applied. Kill needs it off: a
	// manager.Manager only stops cleanly.
	Leader bool
}

// Cluster is a running test cluster.
type Cluster struct {
	t        testing.TB
	Managers []*Manager
	Workers  []*Manager // daemons joined as workers: not in Raft
}

// New starts the cluster o describes; everything stops at the end of
// the test.
func New(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Managers <= 0 {
		o.Managers = 1
	}
	c := &Cluster{t: t}
	for i := range o.Managers {
		var cfg func(*server.Config)
		if o.Configure != nil {
			cfg = func(sc *server.Config) { o.Configure(i, sc) }
		}
		c.Managers = append(c.Managers, start(t, t.TempDir(), testaddr.Loopback(t), cfg, o.Leader))
	}
	ctx := context.Background()
	if _, err := c.Managers[0].Bare().Init(ctx); err != nil {
		t.Fatalf("init: %v", err)
	}
	if o.Managers == 1 {
		c.WaitLeader()
	} else {
		tok := c.Token("manager")
		for _, m := range c.Managers[1:] {
			if _, err := m.Bare().JoinCluster(ctx, tok, c.Managers[0].Addr, "manager"); err != nil {
				t.Fatalf("joining %s: %v", m.Addr, err)
			}
		}
		c.WaitVoters(o.Managers)
	}
	if o.Workers > 0 {
		tok := c.Token("worker")
		for i := range o.Workers {
			var cfg func(*server.Config)
			if o.Configure != nil {
				cfg = func(sc *server.Config) { o.Configure(o.Managers+i, sc) }
			}
			w := start(t, t.TempDir(), testaddr.Loopback(t), cfg, o.Leader)
			if _, err := w.Bare().JoinCluster(ctx, tok, c.Managers[0].Addr, "worker"); err != nil {
				t.Fatalf("joining worker %s: %v", w.Addr, err)
			}
			c.Workers = append(c.Workers, w)
		}
	}
	// Before the daemons stop (cleanups run last registered first), so a
	// test that timed out waiting on the cluster says where it stood.
	t.Cleanup(func() {
		if t.Failed() {
			c.logState()
		}
	})
	return c
}

// stateReportTimeout bounds the failure report's reads.
const stateReportTimeout = 5 * time.Second

// logState logs the cluster's nodes and tasks as the first manager still
// running reads them: each node's role, state, availability and drain,
// each task's node, desired and reported state, readiness and message.
func (c *Cluster) logState() {
	var m *Manager
	for _, cand := range c.Managers {
		if cand.Store() != nil {
			m = cand
			break
		}
	}
	if m == nil {
		c.t.Logf("cluster state at the failure: no manager is running")
		return
	}
	cl, err := client.New(client.Options{Server: m.Addr, CredentialsFile: c.AdminFile(), Retry: stateReportTimeout})
	if err != nil {
		c.t.Logf("cluster state at the failure: %v", err)
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), stateReportTimeout)
	defer cancel()
	var b strings.Builder
	fmt.Fprintf(&b, "cluster state at the failure, read through %s:\n", m.Addr)
	nodes, _, err := cl.List(ctx, legion.KindNode, client.ListOptions{})
	if err != nil {
		fmt.Fprintf(&b, "  nodes: %v\n", err)
	}
	for _, o := range nodes {
		n := o.(*legion.Node)
		drain := "-"
		if n.Status.Drain != nil {
			drain = string(n.Status.Drain.State)
		}
		fmt.Fprintf(&b, "  node %s %s %s %s drain=%s\n", n.Metadata.Name, n.Spec.Role, n.Status.State, n.Spec.Availability, drain)
	}
	tasks, _, err := cl.List(ctx, legion.KindTask, client.ListOptions{AllNamespaces: true})
	if err != nil {
		fmt.Fprintf(&b, "  tasks: %v\n", err)
	}
	for _, o := range tasks {
		tk := o.(*legion.Task)
		fmt.Fprintf(&b, "  task %s/%s node=%s desired=%s state=%s ready=%v restarts=%d %q\n", tk.Metadata.Namespace, tk.Metadata.Name,
			tk.Spec.Node, tk.Spec.DesiredState, tk.Status.State, tk.Status.Ready, tk.Status.Restarts, tk.Status.Message)
	}
	c.t.Log(b.String())
	LogStuckWorkers(c.t)
}

// LogStuckWorkers logs the stacks of this process's agent workers (each
// runs one task's pod) that are making or taking down a pod, for a test
// that timed out waiting for a task: where that pod stood, and, past a
// minute, how long it has waited there. The agents of test clusters run
// in the test's process.
func LogStuckWorkers(t testing.TB) {
	t.Helper()
	if stuck := stuckWorkers(allStacks()); stuck != "" {
		t.Logf("agent workers making or taking down a pod:\n%s", stuck)
	}
}

// allStacks is every goroutine's stack, as a panic prints them.
func allStacks() string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, 2*len(buf))
	}
}

// stuckWorkers picks from stacks those of agent workers making a pod
// (worker.prepare) or taking one down (worker.teardown). A worker
// following its running pod, and the pod's probes, wait for minutes by
// design and are left out.
func stuckWorkers(stacks string) string {
	var stuck []string
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "/internal/agent.(*worker).prepare(") || strings.Contains(g, "/internal/agent.(*worker).teardown(") {
			stuck = append(stuck, g)
		}
	}
	return strings.Join(stuck, "\n\n")
}

// AdminFile is the cluster admin's credentials, written by init.
func (c *Cluster) AdminFile() string {
	return filepath.Join(c.Managers[0].Dir, server.AdminFile)
}

// Client is a client with the admin's credentials to the first manager;
// it retries through elections.
func (c *Cluster) Client() *client.Client { return c.ClientTo(c.Managers[0]) }

// ClientTo is an admin client to manager m.
func (c *Cluster) ClientTo(m *Manager) *client.Client {
	c.t.Helper()
	cl, err := client.New(client.Options{Server: m.Addr, CredentialsFile: c.AdminFile(), Retry: 10 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// Token is the join token of a role (worker or manager).
func (c *Cluster) Token(role string) string {
	c.t.Helper()
	tok, err := c.Client().Token(context.Background(), role)
	if err != nil {
		c.t.Fatalf("%s token: %v", role, err)
	}
	return tok
}

// WaitLeader waits for a running manager that leads and returns it.
func (c *Cluster) WaitLeader() *Manager {
	c.t.Helper()
	var leader *Manager
	WaitFor(c.t, "a leader", settle, func() bool {
		for _, m := range c.Managers {
			if st := m.Store(); st != nil && st.IsLeader() {
				leader = m
				return true
			}
		}
		return false
	})
	return leader
}

// Followers are the managers other than leader, in order.
func (c *Cluster) Followers(leader *Manager) []*Manager {
	var out []*Manager
	for _, m := range c.Managers {
		if m != leader {
			out = append(out, m)
		}
	}
	return out
}

// WaitVoters waits until the leader counts n voters.
func (c *Cluster) WaitVoters(n int) {
	c.t.Helper()
	WaitFor(c.t, fmt.Sprintf("%d voters", n), settle, func() bool {
		for _, m := range c.Managers {
			st := m.Store()
			if st == nil || !st.IsLeader() {
				continue
			}
			f := st.Raft().GetConfiguration()
			if f.Error() != nil {
				return false
			}
			voters := 0
			for _, s := range f.Configuration().Servers {
				if s.Suffrage == raft.Voter {
					voters++
				}
			}
			return voters == n
		}
		return false
	})
}

// Manager is one daemon on loopback with its own data directory (a
// worker's too: it is a manager until it joins as one).
type Manager struct {
	t         testing.TB
	Dir, Addr string
	Server    *server.Server // nil while stopped
	done      chan error
	configure func(*server.Config)
	leader    bool
	mgr       *manager.Manager // with the leader's work, nil without
}

// StartManager starts a fresh (or, over an existing directory, the same)
// daemon at addr that belongs to no cluster until the test inits or joins
// it; it stops when the test ends. configure may be nil.
func StartManager(t testing.TB, dir, addr string, configure func(*server.Config)) *Manager {
	t.Helper()
	return start(t, dir, addr, configure, false)
}

// StartLeading is StartManager with the leader's work beside the port
// (see Options.Leader).
func StartLeading(t testing.TB, dir, addr string, configure func(*server.Config)) *Manager {
	t.Helper()
	return start(t, dir, addr, configure, true)
}

func start(t testing.TB, dir, addr string, configure func(*server.Config), leader bool) *Manager {
	t.Helper()
	m := &Manager{t: t, Dir: dir, Addr: addr, configure: configure, leader: leader}
	t.Cleanup(m.Stop)
	m.start()
	return m
}

func (m *Manager) start() {
	m.t.Helper()
	cfg := server.Config{DataDir: m.Dir, Listen: m.Addr, Timing: store.FastTiming(), WriteTimeout: WriteTimeout,
		Ranges: func(asked addrplan.Plan) (addrplan.Plan, error) { return ranges(m.t, asked) }}
	if m.configure != nil {
		m.configure(&cfg)
	}
	var s *server.Server
	var mgr *manager.Manager
	var err error
	pprof.Do(context.Background(), pprof.Labels(ProfileLabel, m.Addr), func(context.Context) {
		// The port of a manager just stopped may take a moment to free.
		WaitFor(m.t, "the manager's port "+m.Addr, 5*time.Second, func() bool {
			if m.leader {
				if mgr, err = manager.Start(manager.Config{Server: cfg, LeaderCheck: LeaderCheck}); err == nil {
					s = mgr.Server()
				}
			} else {
				s, err = server.New(cfg)
			}
			return err == nil
		})
		m.Server, m.Addr, m.mgr = s, s.Addr(), mgr
		if mgr == nil {
			m.done = make(chan error, 1)
			go func() { m.done <- s.Serve() }()
		}
	})
}

// Store is the manager's store, nil while it is stopped or not a manager.
func (m *Manager) Store() *store.Store {
	if m.Server == nil {
		return nil
	}
	return m.Server.Store()
}

// Stop stops the daemon as SIGTERM would (the leader's work first, when
// it runs); Kill as a crash would. Both may be called on a stopped
// manager.
func (m *Manager) Stop() {
	if m.mgr != nil {
		if err := m.mgr.Stop(); err != nil {
			m.t.Errorf("stopping the manager at %s: %v", m.Addr, err)
		}
		m.Server, m.mgr = nil, nil
		return
	}
	m.end((*server.Server).Stop)
}

// Kill stops the daemon without closing its store cleanly (with the
// leader's work, as manager.Manager.Kill does).
func (m *Manager) Kill() {
	if m.mgr != nil {
		m.mgr.Kill()
		m.Server, m.mgr = nil, nil
		return
	}
	m.end((*server.Server).Kill)
}

func (m *Manager) end(how func(*server.Server)) {
	if m.Server == nil {
		return
	}
	how(m.Server)
	<-m.done
	m.Server = nil
}

// Restart starts the stopped daemon again over its directory and address.
func (m *Manager) Restart() {
	m.t.Helper()
	m.Stop()
	m.start()
}

// Bare is a client without credentials (init, join and status on a
// fresh daemon); it does not retry.
func (m *Manager) Bare() *client.Client {
	m.t.Helper()
	c, err := client.New(client.Options{Server: m.Addr, Retry: -1})
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { c.Close() })
	return c
}

// WaitFor polls cond until it holds, failing the test after d.
func WaitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, d, 10*time.Millisecond, cond)
}
