package dispatcherclient_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
)

// gate forwards TCP to a backend while open; cut closes every connection
// and refuses new ones (closes them at once), as a network link pulled.
type gate struct {
	lis     net.Listener
	backend string
	mu      sync.Mutex
	open    bool
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newGate(t *testing.T, backend string) *gate {
	t.Helper()
	g := &gate{lis: dispatchertest.Listen(t), backend: backend, open: true}
	t.Cleanup(g.close)
	g.wg.Add(1)
	go g.accept()
	return g
}

func (g *gate) addr() string { return g.lis.Addr().String() }

func (g *gate) accept() {
	defer g.wg.Done()
	for {
		c, err := g.lis.Accept()
		if err != nil {
			return
		}
		g.mu.Lock()
		open := g.open
		g.mu.Unlock()
		if !open {
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", g.backend)
		if err != nil {
			c.Close()
			continue
		}
		g.mu.Lock()
		g.conns = append(g.conns, c, b)
		g.mu.Unlock()
		g.wg.Add(2)
		go g.pipe(c, b)
		go g.pipe(b, c)
	}
}

func (g *gate) pipe(dst, src net.Conn) {
	defer g.wg.Done()
	io.Copy(dst, src)
	dst.Close()
}

func (g *gate) set(open bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open = open
	if !open {
		for _, c := range g.conns {
			c.Close()
		}
		g.conns = nil
	}
}

func (g *gate) close() {
	g.lis.Close()
	g.set(false)
	g.wg.Wait()
}

// streamEnds counts the session's log lines saying its assignments
// stream ended.
type streamEnds struct{ n atomic.Int32 }

func (h *streamEnds) Enabled(context.Context, slog.Level) bool { return true }
func (h *streamEnds) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *streamEnds) WithGroup(string) slog.Handler            { return h }
func (h *streamEnds) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "assignments stream ended") {
		h.n.Add(1)
	}
	return nil
}

// A node whose link to the managers came back opens its assignments stream
// again as soon as a heartbeat gets through, however long the stream's
// backoff still had to run: what changed while it was away (its tasks
// given to other nodes) must stop on it at once, not a backoff later.
func TestStreamOpensAgainOnceAHeartbeatGetsThrough(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	lis := dispatchertest.Listen(t)
	link := newGate(t, lis.Addr().String())
	// The manager names the gate as itself, so every call of the node
	// goes through the link.
	dispatchertest.Serve(t, ca, st, lis, func() (string, []string) { return link.addr(), []string{link.addr()} })
	put(t, st, task("a-1", "node-a", ""))

	ends := &streamEnds{}
	s, err := dispatcherclient.New(dispatcherclient.Config{Managers: []string{link.addr()},
		TLS:     dispatchertest.Credentials(t, ca, "node-a", pki.RoleWorker).ClientConfig(),
		Logger:  slog.New(ends),
		Backoff: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := ctxT(t)
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ch, err := s.Assignments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	until(t, ch, summary{Tasks: []string{"a-1@node-a"}, Values: map[string]string{}})

	link.set(false)
	dispatchertest.Poll(t, "the stream ended by the cut", 10*time.Second, func() bool {
		return ends.n.Load() > 0
	})
	put(t, st, task("a-2", "node-a", ""))
	link.set(true)
	until(t, ch, summary{Tasks: []string{"a-1@node-a", "a-2@node-a"}, Values: map[string]string{}})
}
