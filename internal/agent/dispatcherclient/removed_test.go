package dispatcherclient_test

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
)

// A node removed from the cluster hears it from the managers' refusal of
// its certificate: Removed closes with the managers' words, the
// assignments end, and nothing more is asked.
func TestSessionLearnsTheNodeWasRemoved(t *testing.T) {
	m := dispatchertest.Start(t)
	s := newSession(t, m.CA, "node-a", m.Addr)
	ctx := ctxT(t)
	ch := startFollowing(ctx, t, s)
	until(t, ch, summary{Values: map[string]string{}})
	select {
	case <-s.Removed():
		t.Fatal("Removed closed before the node was removed")
	default:
	}
	if err := dispatcher.RecordRemoval(ctx, m.Store, "node-a", time.Now(), time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.Removed():
	case <-time.After(15 * time.Second):
		t.Fatal("Removed not closed 15s after the node's removal")
	}
	err := s.RemovedErr()
	if err == nil || !strings.HasPrefix(err.Error(), "node node-a was removed from the cluster at ") || strings.Contains(err.Error(), "rpc error") {
		t.Fatalf("RemovedErr: %v, want the managers' words alone", err)
	}
	deadline := time.After(15 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return // the stream is not opened again
			}
		case <-deadline:
			t.Fatal("the assignments channel still open 15s after the removal was heard")
		}
	}
}
