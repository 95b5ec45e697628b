package dispatcherclient_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/internal/agent/dispatcherclient"
)

// A node whose link to the managers came back opens its assignments stream
// again as soon as a heartbeat gets through, however long the stream's
// backoff still had to run: what changed while it was away (its tasks
// given to other nodes) must stop on it at once, not a backoff later.
func TestStreamOpensAgainOnceAHeartbeatGetsThrough(t *testing.T) {
	ca := dispatchertest.NewCA(t)
	st := dispatchertest.OpenStore(t)
	lis := dispatchertest.Listen(t)
	link := newLink(t, lis.Addr().String())
	// The manager names the link as itself, so every call of the node
	// goes through the link.
	dispatchertest.Serve(t, ca, st, lis, func() (string, []string) { return link.addr(), []string{link.addr()} })
	put(t, st, task("a-1", "node-a", ""))

	var ended atomic.Int32
	s := openSession(t, dispatcherclient.Config{Managers: []string{link.addr()},
		TLS:         dispatchertest.Credentials(t, ca, "node-a", pki.RoleWorker).ClientConfig(),
		OnStreamEnd: func(error) { ended.Add(1) },
		Backoff:     10 * time.Minute})
	ch := startFollowing(ctxT(t), t, s)
	until(t, ch, summary{Tasks: []string{"a-1@node-a"}, Values: map[string]string{}})

	link.setCut(true)
	dispatchertest.Poll(t, "the stream ended by the cut", 10*time.Second, func() bool {
		return ended.Load() > 0
	})
	put(t, st, task("a-2", "node-a", ""))
	link.setCut(false)
	until(t, ch, summary{Tasks: []string{"a-1@node-a", "a-2@node-a"}, Values: map[string]string{}})
}
