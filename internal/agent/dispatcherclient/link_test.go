package dispatcherclient_test

import (
	"net"
	"sync"
	"testing"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
)

// link forwards TCP to a backend, as the network between a node and a
// manager. Frozen, it stops moving bytes and closes nothing, as a host
// that lost power; cut, it closes every connection and refuses new ones
// (closes them at once), as a cable pulled, until healed.
type link struct {
	lis     net.Listener
	backend string
	frozen  chan struct{}
	once    sync.Once
	mu      sync.Mutex
	cut     bool
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newLink(t *testing.T, backend string) *link {
	t.Helper()
	l := &link{lis: dispatchertest.Listen(t), backend: backend, frozen: make(chan struct{})}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.close)
	return l
}

func (l *link) addr() string { return l.lis.Addr().String() }

func (l *link) freeze() { l.once.Do(func() { close(l.frozen) }) }

// setCut cuts the link (true) or heals it (false).
func (l *link) setCut(cut bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut = cut
	if cut {
		for _, c := range l.conns {
			c.Close()
		}
		l.conns = nil
	}
}

func (l *link) accept() {
	defer l.wg.Done()
	for {
		c, err := l.lis.Accept()
		if err != nil {
			return
		}
		l.mu.Lock()
		cut := l.cut
		l.mu.Unlock()
		if cut {
			c.Close()
			continue
		}
		b, err := net.Dial("tcp", l.backend)
		if err != nil {
			c.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, c, b)
		l.mu.Unlock()
		l.wg.Add(2)
		go l.pipe(c, b)
		go l.pipe(b, c)
	}
}

// pipe copies until frozen, then holds the bytes it read.
func (l *link) pipe(dst, src net.Conn) {
	defer l.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-l.frozen:
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

func (l *link) close() {
	l.lis.Close()
	l.setCut(true)
	l.wg.Wait()
}
