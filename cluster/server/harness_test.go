package server

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/leakcheck"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testpoll"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// manager is one in-process manager on loopback with its own directory.
type manager struct {
	t    testing.TB
	dir  string
	addr string
	s    *Server
	done chan error
	opts []func(*Config) // kept for restarts
}

func startManager(t testing.TB, dir, addr string, opts ...func(*Config)) *manager {
	t.Helper()
	var s *Server
	var err error
	// The port of a manager just stopped may take a moment to free.
	deadline := time.Now().Add(5 * time.Second)
	for {
		cfg := Config{DataDir: dir, Listen: addr, Timing: store.FastTiming(), WriteTimeout: 5 * time.Second}
		for _, o := range opts {
			o(&cfg)
		}
		s, err = New(cfg)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("starting manager in %s: %v", dir, err)
	}
	m := &manager{t: t, dir: dir, addr: s.Addr(), s: s, done: make(chan error, 1), opts: opts}
	go func() { m.done <- s.Serve() }()
	return m
}

func newManager(t testing.TB, opts ...func(*Config)) *manager {
	return startManager(t, t.TempDir(), testaddr.Loopback(t), opts...)
}

// stop is SIGTERM; kill a crash.
func (m *manager) stop() {
	if m.s == nil {
		return
	}
	m.s.Stop()
	<-m.done
	m.s = nil
}

func (m *manager) kill() {
	if m.s == nil {
		return
	}
	m.s.Kill()
	<-m.done
	m.s = nil
}

func (m *manager) restart() { *m = *startManager(m.t, m.dir, m.addr, m.opts...) }

// bare is a client without credentials (init, join, status on a fresh
// daemon).
func (m *manager) bare() *client.Client {
	m.t.Helper()
	c, err := client.New(client.Options{Server: m.addr, Retry: -1})
	if err != nil {
		m.t.Fatal(err)
	}
	m.t.Cleanup(func() { c.Close() })
	return c
}

// admin is a client with the admin credentials of the cluster whose
// admin.pem is in dir.
func adminClient(t testing.TB, addr, dir string) *client.Client {
	t.Helper()
	c, err := client.New(client.Options{Server: addr, CredentialsFile: filepath.Join(dir, AdminFile), Retry: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func initCluster(t testing.TB, m *manager) *client.Client {
	t.Helper()
	resp, err := m.bare().Init(context.Background())
	if err != nil {
		t.Fatalf("init: %v", err)
	}
	if resp.AdminCredentials != filepath.Join(m.dir, AdminFile) {
		t.Fatalf("admin credentials at %s", resp.AdminCredentials)
	}
	return adminClient(t, m.addr, m.dir)
}

// join has n join admin's cluster through the manager at addr, with a
// fresh token for role.
func join(t testing.TB, admin *client.Client, n *manager, role, addr string) {
	t.Helper()
	ctx := context.Background()
	tok, err := admin.Token(ctx, role)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.bare().JoinCluster(ctx, tok, addr, ""); err != nil {
		t.Fatalf("%s join: %v", role, err)
	}
}

// joinedPair starts and initialises a manager, then a second node that
// joins it as role; both stop when the test ends.
func joinedPair(t *testing.T, role string, opts ...func(*Config)) (m, n *manager, admin *client.Client) {
	t.Helper()
	m = newManager(t, opts...)
	t.Cleanup(m.stop)
	admin = initCluster(t, m)
	n = newManager(t, opts...)
	t.Cleanup(n.stop)
	join(t, admin, n, role, m.addr)
	return m, n, admin
}

// twoManagersAndAWorker is joinedPair's two managers and a third node
// joined as a worker and registered with the leader's dispatcher.
func twoManagersAndAWorker(t *testing.T) (m, f, w *manager, admin *client.Client) {
	t.Helper()
	m, f, admin = joinedPair(t, "manager")
	w = newManager(t)
	t.Cleanup(w.stop)
	join(t, admin, w, "worker", m.addr)
	if err := registerAs(t, m.addr, w.s.Credentials()); err != nil {
		t.Fatal(err)
	}
	return m, f, w, admin
}

// shortCertLife is how long shortCerts' certificates last: renewed after
// two thirds of it, the last third is the margin a renewal has before the
// certificate it is asked with expires, and a loaded machine electing
// between two managers once took more than 1 s of a 3 s life.
const shortCertLife = 6 * time.Second

// shortCerts makes certificates last shortCertLife, checked for renewal
// every 100 ms.
func shortCerts(c *Config) { c.CertLifetime, c.RenewCheck = shortCertLife, 100*time.Millisecond }

func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	testpoll.Until(t, what, d, 10*time.Millisecond, cond)
}

func configObj(ns, name, text string) *legion.Config {
	o, _ := legion.New(legion.KindConfig)
	c := o.(*legion.Config)
	c.Metadata.Name, c.Metadata.Namespace = name, ns
	c.Spec.Text = text
	return c
}

// applyAgain applies o, and applies it again (at most twice more) when the
// answer is that the write may or may not have applied: on a loaded
// machine a three-manager write can outlast the test timing's leader
// lease, and the leader steps down not knowing. Applying the same object
// again is what the error tells a user to do, and leaves one copy.
func applyAgain(t testing.TB, c *client.Client, o legion.Object) (client.Result, error) {
	t.Helper()
	r, err := c.ApplyOne(context.Background(), o, client.ApplyOptions{})
	for try := 0; errors.Is(err, client.ErrOutcomeUnknown) && try < 2; try++ {
		t.Logf("apply %s: %v; again", o.GetMetadata().Name, err)
		r, err = c.ApplyOne(context.Background(), o, client.ApplyOptions{})
	}
	return r, err
}

func mustParse(t testing.TB, yaml string) []legion.Object {
	t.Helper()
	objs, err := legion.ParseManifest("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return objs
}
