// Package scale runs a cluster at size in one process for tests and
// benchmarks: real managers (internal/testcluster, with the leader's
// work) and many simulated agents. Each simulated agent is a real
// dispatcher client (dispatcherclient.Session over mutual TLS): it joins
// with the worker token, registers, sends heartbeats, follows its
// assignments and reports its tasks, "running" what it is told to at
// once and dropping what is taken away. The harness counts what the
// assignment streams carry, and can stop managers and drop agents.
//
// It is for tests only, as testcluster is.
package scale

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testcluster"
)

// joinWithin bounds how long an agent tries to join.
const joinWithin = 3 * time.Minute

// Options size a run.
type Options struct {
	Managers int // default 3
	Agents   int // default 256
	// Timing, when set, replaces the tests' fast Raft timing: the full run
	// uses the production one, as its figures are meant for a real cluster
	// (and a fast election timeout on a loaded machine holds elections
	// that a real cluster would not).
	Timing *store.Timing
}

// Harness is a running cluster with its simulated agents.
type Harness struct {
	t       testing.TB
	Cluster *testcluster.Cluster
	Agents  []*Agent
	addrs   []string

	// What the assignment streams carried to every agent.
	Messages, Deltas, Bytes atomic.Int64
	// whole is the parts deltas carried whole, by name (see
	// dispatcherclient.Message): how many, and their bytes.
	wholeMu sync.Mutex
	whole   map[string]WholeParts
	// Reports is how many task reports the agents made.
	Reports atomic.Int64
	// Trace, when set, is told the counts at each poll of WaitFor.
	Trace func(format string, args ...any)
	// Largest is the largest message since ResetLargest.
	Largest atomic.Int64
	// Poll is how often WaitFor looks at the tally (default 100 ms).
	Poll time.Duration

	tally     *tally
	tallyOnce sync.Once

	ends streamEnds
	logs managerLogs
	// metrics is each manager's registry (server.Config.Metrics), read
	// for its planning passes.
	metrics []*prometheus.Registry
}

// Passes reads what the leaders' planning passes did so far.
func (h *Harness) Passes() (Passes, error) { return readPasses(h.metrics) }

// Elections is what the managers' Raft said about elections from t on, a
// line each, with its time after t.
func (h *Harness) Elections(t time.Time) []string {
	return h.logs.electionsSince(t, h.managerName)
}

// Warnings is the warnings and errors the managers logged from t up to
// end: a line for each manager and message, with how many times it came
// and the first in full, most first.
func (h *Harness) Warnings(t, end time.Time) []string {
	return h.logs.warningsBetween(t, end, h.managerName)
}

// managerName names manager i by its address.
func (h *Harness) managerName(i int) string {
	if i < len(h.Cluster.Managers) {
		return h.Cluster.Managers[i].Addr
	}
	return fmt.Sprint("manager ", i)
}

// StreamEnds says why assignment streams ended since the last call, one
// "count reason" line per reason, most frequent first.
func (h *Harness) StreamEnds() []string { return h.ends.take() }

// ResetLargest starts the record of the largest message again.
func (h *Harness) ResetLargest() { h.Largest.Store(0) }

// count counts a message an agent's assignments stream carried.
func (h *Harness) count(m dispatcherclient.Message) {
	h.Messages.Add(1)
	h.Bytes.Add(int64(m.Size))
	for {
		l := h.Largest.Load()
		if int64(m.Size) <= l || h.Largest.CompareAndSwap(l, int64(m.Size)) {
			break
		}
	}
	if m.Delta {
		h.Deltas.Add(1)
	}
	if len(m.Whole) == 0 {
		return
	}
	h.wholeMu.Lock()
	defer h.wholeMu.Unlock()
	for _, p := range m.Whole {
		w := h.whole[p.Name]
		h.whole[p.Name] = WholeParts{w.Count + 1, w.Bytes + int64(p.Bytes)}
	}
}

// Traffic is a reading of the counters.
type Traffic struct {
	Messages, Deltas, Bytes, Reports int64
	Whole                            map[string]WholeParts // by part
}

// WholeParts is how many times deltas carried a part whole, and its
// bytes in all.
type WholeParts struct{ Count, Bytes int64 }

// Traffic reads the counters.
func (h *Harness) Traffic() Traffic {
	h.wholeMu.Lock()
	whole := maps.Clone(h.whole)
	h.wholeMu.Unlock()
	return Traffic{h.Messages.Load(), h.Deltas.Load(), h.Bytes.Load(), h.Reports.Load(), whole}
}

// Sub is the traffic since an earlier reading.
func (a Traffic) Sub(b Traffic) Traffic {
	whole := map[string]WholeParts{}
	for name, w := range a.Whole {
		if d := (WholeParts{w.Count - b.Whole[name].Count, w.Bytes - b.Whole[name].Bytes}); d.Count > 0 {
			whole[name] = d
		}
	}
	return Traffic{a.Messages - b.Messages, a.Deltas - b.Deltas, a.Bytes - b.Bytes, a.Reports - b.Reports, whole}
}

// New starts the managers and the agents; everything stops at the end of
// the test.
func New(t testing.TB, o Options) *Harness {
	t.Helper()
	if o.Managers <= 0 {
		o.Managers = 3
	}
	if o.Agents <= 0 {
		o.Agents = 256
	}
	h := &Harness{t: t, whole: map[string]WholeParts{}}
	for range o.Managers {
		h.metrics = append(h.metrics, prometheus.NewRegistry())
	}
	opts := testcluster.Options{Managers: o.Managers, Leader: true, Configure: func(i int, c *server.Config) {
		c.Logger = slog.New(h.logs.handler(i))
		c.Metrics = h.metrics[i]
		if o.Timing != nil {
			c.Timing = *o.Timing
		}
	}}
	c := testcluster.New(t, opts)
	h.Cluster = c
	for _, m := range c.Managers {
		h.addrs = append(h.addrs, m.Addr)
	}
	tok := c.Token("worker")
	h.Agents = make([]*Agent, o.Agents)
	var wg sync.WaitGroup
	errs := make(chan error, o.Agents)
	sem := make(chan struct{}, 16)
	for i := range o.Agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			name := fmt.Sprintf("sim-%03d", i)
			// What the agent starts inherits the label (see CPUSplit).
			pprof.Do(context.Background(), pprof.Labels(AgentLabel, name), func(context.Context) {
				a, err := h.startAgent(name, tok, i)
				if err != nil {
					errs <- err
					return
				}
				h.Agents[i] = a
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return h
}

// Agent is one simulated node.
type Agent struct {
	Name   string
	h      *Harness
	creds  *pki.Credentials
	sess   *dispatcherclient.Session
	cancel context.CancelFunc
	done   chan struct{}
	octet  int

	mu      sync.Mutex
	tasks   map[taskName]heldTask // what it runs
	pass    uint64                // sets taken
	nextIP  int
	dropped bool
	// last is the task list of the last set taken. The session hands a
	// list over as it holds it and makes a new one at the next change
	// to it, so a set with the same list (same start, same length) has
	// no task that changed: most sets of a rollout change endpoints
	// only, and looking again at 80 tasks each time was the harness's
	// own CPU, not the cluster's.
	last []*legion.Task
}

// taskName is a task's namespace and name.
type taskName struct{ ns, name string }

// heldTask is a task an agent runs.
type heldTask struct {
	t    *legion.Task
	sent string // the last report made of it: uid and state
	pass uint64 // the last set that held it
}

// startAgent joins a node with the token and starts its session and its
// work.
func (h *Harness) startAgent(name, token string, i int) (*Agent, error) {
	// Joins go on through a loaded machine's elections and slow reads,
	// as applies do.
	jctx, cancel := context.WithTimeout(context.Background(), joinWithin)
	defer cancel()
	var creds *pki.Credentials
	if err := retry(jctx, func() (err error) {
		creds, err = Join(context.Background(), h.addrs[i%len(h.addrs)], token, name)
		return err
	}); err != nil {
		return nil, fmt.Errorf("agent %s: %w", name, err)
	}
	a := &Agent{Name: name, h: h, creds: creds, octet: i, tasks: map[taskName]heldTask{}, done: make(chan struct{})}
	cpu, mem := legion.CPU(64_000), legion.Bytes(256<<30)
	sess, err := dispatcherclient.New(dispatcherclient.Config{
		Node: name, Managers: slices.Clone(h.addrs), TLS: creds.ClientConfig(),
		Status: func() legion.NodeStatus {
			return legion.NodeStatus{State: legion.NodeReady, Hostname: name, Addr: fmt.Sprintf("192.0.2.%d", i%250+1),
				Platform:  legion.Platform{OS: runtime.GOOS, Arch: runtime.GOARCH, Linux: runtime.GOOS == "linux"},
				Resources: legion.NodeResources{Capacity: legion.ResourceRequests{CPU: cpu, Memory: mem}, Allocatable: legion.ResourceRequests{CPU: cpu, Memory: mem}},
				Version:   "scale", ImagePins: true}
		},
		Backoff:       50 * time.Millisecond,
		OnStreamEnd:   h.ends.add,
		OnAssignments: h.count,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a.sess, a.cancel = sess, cancel
	h.t.Cleanup(a.Drop)
	if err := sess.Start(ctx); err != nil {
		close(a.done)
		return nil, fmt.Errorf("agent %s: starting: %w", name, err)
	}
	ch, err := sess.Assignments(ctx)
	if err != nil {
		close(a.done)
		return nil, err
	}
	go func() {
		defer close(a.done)
		a.run(ctx, ch)
	}()
	return a, nil
}

// Join asks the manager at addr for a worker certificate with the token,
// as a joining daemon does (for simulated workers: this harness's agents
// and internal/daemon's benchmarks).
func Join(ctx context.Context, addr, token, name string) (*pki.Credentials, error) {
	tok, err := pki.ParseToken(token)
	if err != nil {
		return nil, err
	}
	key, err := pki.NewKey()
	if err != nil {
		return nil, err
	}
	csr, err := pki.CSR(key, name)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(pki.JoinConfig(tok.Digest, nil))))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := legionpb.NewClusterClient(conn).Join(ctx, &legionpb.JoinRequest{Token: token, Csr: csr, NodeId: name,
		Role: "worker", Protocol: server.Protocol})
	if err != nil {
		return nil, fmt.Errorf("join: %w", err)
	}
	keyPEM, err := pki.KeyPEM(key)
	if err != nil {
		return nil, err
	}
	return pki.NewCredentials(resp.Certificate, keyPEM, resp.CaCertificate)
}

// Drop stops the agent as a node that went away would: no more
// heartbeats, streams or reports.
func (a *Agent) Drop() {
	a.mu.Lock()
	if a.dropped {
		a.mu.Unlock()
		return
	}
	a.dropped = true
	a.mu.Unlock()
	a.cancel()
	a.sess.Close()
	<-a.done
}

// run takes each set as the real agent would, at once: every task told to
// run is running, ready, with an address; every task told to stop is
// stopped; what the set no longer holds is forgotten. Every set holds
// all of a node's tasks, and 256 agents take one after each change: a
// task's pass costs no allocation.
func (a *Agent) run(ctx context.Context, ch <-chan agent.Assignments) {
	for as := range ch {
		if len(as.Tasks) == len(a.last) && (len(as.Tasks) == 0 || &as.Tasks[0] == &a.last[0]) {
			continue
		}
		a.last = as.Tasks
		type report struct {
			t  *legion.Task
			st legion.TaskStatus
		}
		var todo []report
		a.mu.Lock()
		a.pass++
		for _, t := range as.Tasks {
			k := taskName{t.Metadata.Namespace, t.Metadata.Name}
			h := a.tasks[k]
			h.t, h.pass = t, a.pass
			a.tasks[k] = h
			var st legion.TaskStatus
			switch {
			case t.Spec.DesiredState == legion.TaskRunning && t.Status.State != legion.TaskRunning:
				ip := t.Status.IP
				if ip == "" {
					a.nextIP++
					ip = fmt.Sprintf("10.%d.%d.%d", 100+a.octet/250, a.octet%250, a.nextIP%250+2)
				}
				now := time.Now()
				st = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: ip, Started: &now, Timestamp: now}
			case t.Spec.DesiredState != legion.TaskRunning && !terminal(t.Status.State):
				now := time.Now()
				st = legion.TaskStatus{State: legion.TaskShutdown, Finished: &now, Timestamp: now}
			default:
				continue
			}
			mark := t.Metadata.UID + "/" + string(st.State)
			if h.sent == mark {
				continue // reported already; the set is older than the report
			}
			h.sent = mark
			a.tasks[k] = h
			todo = append(todo, report{t, st})
		}
		if len(a.tasks) > len(as.Tasks) {
			// Some the set no longer holds.
			for k, h := range a.tasks {
				if h.pass != a.pass {
					delete(a.tasks, k)
				}
			}
		}
		a.mu.Unlock()
		// Reports go out a few at a time, as a node's tasks start side by
		// side.
		var wg sync.WaitGroup
		sem := make(chan struct{}, 8)
		for _, r := range todo {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				// Through elections too: one no manager could take is tried
				// again until it is taken or the agent stops, when it is due
				// as a real agent's worker sends it (agent.Resend, looked at
				// as often); a refusal is not.
				var resend agent.Resend
				var tick *time.Ticker
				for {
					calls := a.sess.LeaderCalls()
					err := a.sess.Report(ctx, r.t.Metadata.Namespace, r.t.Metadata.Name, r.t.Metadata.UID, r.st)
					if err == nil {
						a.h.Reports.Add(1)
						return
					}
					if !errors.Is(err, agent.ErrNoManager) {
						return
					}
					resend.Refused(time.Now(), calls)
					if tick == nil {
						tick = time.NewTicker(agent.SuperviseEvery)
						defer tick.Stop()
					}
					for !resend.Due(time.Now(), a.sess.LeaderCalls()) {
						select {
						case <-ctx.Done():
							return
						case <-tick.C:
						}
					}
				}
			}()
		}
		wg.Wait()
	}
}

func terminal(s legion.TaskState) bool {
	switch s {
	case legion.TaskComplete, legion.TaskFailed, legion.TaskRejected, legion.TaskShutdown, legion.TaskOrphaned:
		return true
	}
	return false
}

// WholeSetSize is the size of the whole set a stream opened now as the
// agent's node starts with: what every message would cost were sets sent
// whole.
func (a *Agent) WholeSetSize(ctx context.Context) (int, error) {
	conn, err := grpc.NewClient(a.h.addrs[0], grpc.WithTransportCredentials(credentials.NewTLS(a.creds.ClientConfig())))
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := legionpb.NewDispatcherClient(conn).Assignments(sctx, &legionpb.AssignmentsRequest{Node: a.Name, Deltas: true})
	if err != nil {
		return 0, err
	}
	set, err := st.Recv()
	if err != nil {
		return 0, err
	}
	if set.GetDelta() {
		return 0, fmt.Errorf("the first message of a stream is a delta")
	}
	return proto.Size(set), nil
}

// Client is an admin client that follows the leader.
func (h *Harness) Client() *client.Client {
	return h.Cluster.ClientTo(h.Cluster.WaitLeader())
}
