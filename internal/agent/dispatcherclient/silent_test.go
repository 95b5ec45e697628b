package dispatcherclient_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
)

// freezer forwards TCP to a backend until frozen; then it stops moving
// bytes and closes nothing, as a host that lost power or its network.
type freezer struct {
	lis     net.Listener
	backend string
	frozen  chan struct{}
	once    sync.Once
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newFreezer(t *testing.T, backend string) *freezer {
	t.Helper()
	f := &freezer{lis: dispatchertest.Listen(t), backend: backend, frozen: make(chan struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *freezer) addr() string { return f.lis.Addr().String() }

func (f *freezer) freeze() { f.once.Do(func() { close(f.frozen) }) }

func (f *freezer) track(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conns = append(f.conns, c)
}

func (f *freezer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.lis.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", f.backend)
		if err != nil {
			c.Close()
			continue
		}
		f.track(c)
		f.track(b)
		f.wg.Add(2)
		go f.pipe(c, b)
		go f.pipe(b, c)
	}
}

// pipe copies until frozen, then holds the bytes it read.
func (f *freezer) pipe(dst, src net.Conn) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-f.frozen:
			// Swallow: read on so the sender's writes succeed, deliver nothing.
			if err != nil {
				return
			}
			continue
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (f *freezer) close() {
	f.lis.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func TestSessionLeavesAManagerThatWentSilent(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	l1, l2 := dispatchertest.Listen(t), dispatchertest.Listen(t)
	m1 := dispatchertest.Serve(t, ca, st, l1, nil)
	silent := newFreezer(t, m1.Addr)
	a2 := l2.Addr().String()
	// The silent manager leads, as far as replies tell, so heartbeats go
	// there and time out once it freezes.
	peers := func() (string, []string) { return silent.addr(), []string{silent.addr(), a2} }
	dispatchertest.Serve(t, ca, st, l2, peers)
	put(t, st, task("a-1", "node-a", ""))

	s, err := dispatcherclient.New(dispatcherclient.Config{Managers: []string{silent.addr(), a2},
		TLS:     dispatchertest.Credentials(t, ca, "node-a", pki.RoleWorker).ClientConfig(),
		Backoff: 20 * time.Millisecond, CallTimeout: 500 * time.Millisecond})
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

	silent.freeze()
	put(t, st, task("a-2", "node-a", ""))
	// The stream on the silent manager says nothing; the next heartbeat
	// times out there and the stream moves to the other manager.
	until(t, ch, summary{Tasks: []string{"a-1@node-a", "a-2@node-a"}, Values: map[string]string{}})
}
