package dispatcherclient_test

import (
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
)

func TestSessionLeavesAManagerThatWentSilent(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	l1, l2 := dispatchertest.Listen(t), dispatchertest.Listen(t)
	m1 := dispatchertest.Serve(t, ca, st, l1, nil)
	silent := newLink(t, m1.Addr)
	a2 := l2.Addr().String()
	// The silent manager leads, as far as replies tell, so heartbeats go
	// there and time out once it freezes.
	peers := func() (string, []string) { return silent.addr(), []string{silent.addr(), a2} }
	dispatchertest.Serve(t, ca, st, l2, peers)
	put(t, st, task("a-1", "node-a", ""))

	s := openSession(t, dispatcherclient.Config{Managers: []string{silent.addr(), a2},
		TLS:     dispatchertest.Credentials(t, ca, "node-a", pki.RoleWorker).ClientConfig(),
		Backoff: 20 * time.Millisecond, CallTimeout: 500 * time.Millisecond})
	ch := startFollowing(ctxT(t), t, s)
	until(t, ch, summary{Tasks: []string{"a-1@node-a"}, Values: map[string]string{}})

	silent.freeze()
	put(t, st, task("a-2", "node-a", ""))
	// The stream on the silent manager says nothing; the next heartbeat
	// times out there and the stream moves to the other manager.
	until(t, ch, summary{Tasks: []string{"a-1@node-a", "a-2@node-a"}, Values: map[string]string{}})
}
