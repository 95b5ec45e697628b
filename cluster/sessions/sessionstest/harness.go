// Package sessionstest runs the whole sessions path for tests: a
// one-manager store, the Pods and Sessions services on a loopback port
// with mutual TLS, and node agents (the real sessionsclient) reading logs
// from an in-memory Logs and running commands through Execs. Tests only.
package sessionstest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/sessions"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/agent/sessionsclient"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// Manager is one manager serving Pods and Sessions.
type Manager struct {
	CA    *pki.CA
	Store *store.Store
	Pods  *sessions.Service
	Addr  string
	// Admin is an admin certificate of the cluster, also written as a
	// bundle (certificate, key, CA) at AdminFile for the CLI.
	Admin     *pki.Credentials
	AdminFile string
	stopping  chan struct{}
	once      *sync.Once
}

// Stopping says the manager is shutting down, as the server's watch
// context ending does: open streams end with UNAVAILABLE.
func (m *Manager) Stopping() { m.once.Do(func() { close(m.stopping) }) }

// Start runs a manager; everything stops at the test's end. Each opt
// may change the service's options.
func Start(t testing.TB, opts ...func(*sessions.Options)) *Manager {
	t.Helper()
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	stopping, once := make(chan struct{}), &sync.Once{}
	o := sessions.Options{AttachTimeout: 5 * time.Second, Stopping: stopping}
	for _, opt := range opts {
		opt(&o)
	}
	svc := sessions.New(sessions.FromStore(func() *store.Store { return st }), o)
	mgr, _ := dispatchertest.Issue(t, ca, "m1", pki.RoleManager)
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(mgr.ServerConfig())))
	svc.RegisterOn(g)
	lis := dispatchertest.Listen(t)
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	t.Cleanup(func() {
		once.Do(func() { close(stopping) })
		g.GracefulStop()
		<-served
	})
	admin, bundle := dispatchertest.Issue(t, ca, "admin", pki.RoleAdmin)
	file := filepath.Join(t.TempDir(), "admin.pem")
	if err := os.WriteFile(file, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	return &Manager{CA: ca, Store: st, Pods: svc, Addr: lis.Addr().String(), Admin: admin, AdminFile: file, stopping: stopping, once: once}
}

// Agent is a node's sessions client.
type Agent struct {
	Node    string
	DataDir string
	Logs    *Logs
	Execs   *Execs
	Pods    *PodIPs
	Volumes *Volumes
	stop    func()
}

// Stop ends the agent's sessions and streams, as a node cut off would.
func (a *Agent) Stop() { a.stop() }

// StartAgent runs node's sessions client against m, reading logs from a
// new Logs, and waits until m holds its stream. Its certificate is
// recorded as the node's, as a join records it.
func (m *Manager) StartAgent(t testing.TB, node string) *Agent {
	t.Helper()
	creds, _ := dispatchertest.Issue(t, m.CA, node, pki.RoleWorker)
	dispatchertest.Record(t, m.Store, creds)
	return m.startAgent(t, node, creds, "")
}

// StartUnrecordedAgent is StartAgent for a node with no certificate on
// record, as one that joined before records were kept.
func (m *Manager) StartUnrecordedAgent(t testing.TB, node string) *Agent {
	t.Helper()
	creds, _ := dispatchertest.Issue(t, m.CA, node, pki.RoleWorker)
	return m.startAgent(t, node, creds, "")
}

// StartManagerAgent runs the sessions client of a manager's own node
// named node, as `legion up` does: the manager's certificate (named cert)
// asks for the node by name.
func (m *Manager) StartManagerAgent(t testing.TB, cert, node string) *Agent {
	t.Helper()
	creds, _ := dispatchertest.Issue(t, m.CA, cert, pki.RoleManager)
	dispatchertest.Record(t, m.Store, creds)
	return m.startAgent(t, node, creds, node)
}

func (m *Manager) startAgent(t testing.TB, node string, creds *pki.Credentials, asked string) *Agent {
	t.Helper()
	a := &Agent{Node: node, DataDir: t.TempDir(), Logs: NewLogs(), Execs: &Execs{}, Pods: &PodIPs{}, Volumes: &Volumes{}}
	c, err := sessionsclient.New(sessionsclient.Config{Managers: func() []string { return []string{m.Addr} }, TLS: creds.ClientConfig(), Node: asked,
		Logs: a.Logs.Read, Exec: a.Execs.Exec, PodIP: a.Pods.PodIP, Volumes: a.Volumes, DataDir: a.DataDir, Backoff: 50 * time.Millisecond, Refresh: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.Run(ctx)
	}()
	a.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(a.stop)
	dispatchertest.Poll(t, "agent of "+node+" connected", 10*time.Second, func() bool { return m.Pods.Connected(node) })
	return a
}

// Put stores a task on node (none: not placed) with the given
// containers, in state.
func (m *Manager) Put(t testing.TB, ns, name, node string, state legion.TaskState, owner legion.Owner, containers ...string) *legion.Task {
	t.Helper()
	task := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask, Metadata: legion.Metadata{Name: name, Namespace: ns}}}
	task.Spec.Node = node
	task.Spec.Owner = owner
	task.Spec.DesiredState = legion.TaskRunning
	for _, c := range containers {
		task.Spec.Pod.Containers = append(task.Spec.Pod.Containers, legion.Container{Name: c, Image: "example/app:1"})
	}
	task.Status.State = state
	now := time.Now()
	task.Status.Timestamp = now
	if state.Terminal() {
		task.Status.Finished = &now
	}
	got, _, err := m.Store.Put(context.Background(), task, store.WriteOptions{KeepStatus: false})
	if err != nil {
		t.Fatal(err)
	}
	return got.(*legion.Task)
}

// SaveOutput writes a finished task's saved output of container, as the
// agent does when it removes the pod.
func (a *Agent) SaveOutput(t testing.TB, task *legion.Task, container, records string) {
	t.Helper()
	dir := filepath.Join(a.DataDir, "logs", task.Metadata.UID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, container+".log"), []byte(records), 0o600); err != nil {
		t.Fatal(err)
	}
}
