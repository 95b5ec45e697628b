package lab_test

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/lab"
	"github.com/legionbsd/legion/internal/regmodel"
	"github.com/legionbsd/legion/internal/testpoll"
)

// TestPartitions runs each partition scenario on a lab of its own, all
// at once whatever -parallel says: they wait on heartbeats and elections,
// not on the CPU, and one after another they would take minutes.
func TestPartitions(t *testing.T) {
	t.Parallel()
	if err := lab.Available(); err != nil {
		t.Skipf("no lab: %v", err)
	}
	scenarios := []struct {
		name string
		run  func(*testing.T)
	}{
		{"leader cut off from the other managers", leaderCutOffFromTheOtherManagers},
		{"worker cut off", workerCutOff},
		{"worker cut off from its manager only", workerCutOffFromItsManagerOnly},
		{"worker cut off from the leader only", workerCutOffFromTheLeaderOnly},
		{"flapping link", flappingLink},
	}
	var wg sync.WaitGroup
	for _, s := range scenarios {
		// t.Run may be called from several goroutines; each returns when
		// its scenario has.
		wg.Go(func() { t.Run(s.name, s.run) })
	}
	wg.Wait()
}

func configObj(name, value string) *legion.Config {
	return &legion.Config{Header: legion.Header{APIVersion: "legion/v1", Kind: legion.KindConfig,
		Metadata: legion.Metadata{Namespace: "default", Name: name}}, Spec: legion.SecretSpec{Data: []byte(value)}}
}

// history records register operations made through the lab's managers.
type history struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
	acked atomic.Int64 // writes the cluster acknowledged
	reads atomic.Int64 // reads that answered
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) record(op porcupine.Operation) {
	h.mu.Lock()
	h.ops = append(h.ops, op)
	h.mu.Unlock()
}

// put writes key=value through c; a write that failed may still apply
// at any time after its call, so it never returns in the history.
func (h *history) put(ctx context.Context, c *client.Client, id int, key, value string) error {
	call := h.now()
	_, err := c.ApplyOne(ctx, configObj(key, value), client.ApplyOptions{})
	ret := h.now()
	if err != nil {
		ret = math.MaxInt64
	} else {
		h.acked.Add(1)
	}
	h.record(porcupine.Operation{ClientId: id, Input: regmodel.Input{Put: true, Key: key, Value: value}, Call: call, Output: regmodel.Output{}, Return: ret})
	return err
}

// get reads key through c; a failed read tells nothing and is left out.
func (h *history) get(ctx context.Context, c *client.Client, id int, key string) error {
	call := h.now()
	o, err := c.Get(ctx, legion.KindConfig, "default", key)
	ret := h.now()
	switch {
	case err == nil:
		h.reads.Add(1)
		h.record(porcupine.Operation{ClientId: id, Input: regmodel.Input{Key: key}, Call: call, Output: regmodel.Output{Value: string(o.(*legion.Config).Spec.Data)}, Return: ret})
	case client.Code(err).String() == "NotFound":
		h.reads.Add(1)
		h.record(porcupine.Operation{ClientId: id, Input: regmodel.Input{Key: key}, Call: call, Output: regmodel.Output{}, Return: ret})
	}
	return err
}

// electionBound is how soon the managers left with a majority must have
// a new leader once the old one is cut off: raft draws each follower's
// heartbeat timeout between one and two HeartbeatTimeouts, and a
// candidate's election timeout between one and two ElectionTimeouts; one
// more ElectionTimeout allows a split vote. The old leader steps down
// within the same bound (its lease is shorter than an election).
func electionBound(t store.Timing) time.Duration {
	return 2*t.HeartbeatTimeout + 3*t.ElectionTimeout
}

// The leader cut off from the other two managers: they elect a new one
// within the election bound, the old one steps down and takes no write,
// every write and read made through any manager during and after the cut
// is linearizable, and no acknowledged write is lost once healed.
func leaderCutOffFromTheOtherManagers(t *testing.T) {
	l := lab.New(t, lab.Options{Managers: 3, ClientRetry: time.Second})
	timing := store.FastTiming()
	old, oldSt, err := l.Leader()
	if err != nil {
		t.Fatal(err)
	}
	var others []*lab.Node
	for _, m := range l.Managers() {
		if m != old {
			others = append(others, m)
		}
	}

	h := &history{start: time.Now()}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keys := []string{"k0", "k1", "k2"}
	var seq atomic.Int64
	var wg sync.WaitGroup
	for id := range 6 { // two clients a manager
		c := l.Client(l.Managers()[id%3])
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				key := keys[(id+i)%len(keys)]
				octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
				if i%2 == 0 {
					h.put(octx, c, id, key, fmt.Sprintf("v%d", seq.Add(1)))
				} else {
					h.get(octx, c, id, key)
				}
				ocancel()
			}
		})
	}
	stopClients := func() { cancel(); wg.Wait() }
	defer stopClients()
	testpoll.Until(t, "writes before the cut", 20*time.Second, 50*time.Millisecond, func() bool { return h.acked.Load() >= 10 })

	if err := l.Isolate(old, others...); err != nil {
		t.Fatal(err)
	}
	// The clock starts once the cut is whole: until the last rule is in,
	// a follower still hears the leader (on a loaded machine putting the
	// rules in takes hundreds of milliseconds).
	cutAt := time.Now()
	// Every manager is asked at once each round, so neither time waits
	// on another's answer. A time is taken when the round that saw the
	// change began: the round before did not see it, and on a loaded
	// machine a round's answers can take longer than the change itself.
	var newLeader *lab.Node
	var newTerm uint64
	var elected, steppedDown time.Duration
	seen := make([]string, 3)
	if err := lab.WaitFor(20*time.Second, "a new leader among the other two, and the old one stepping down", func() bool {
		var mu sync.Mutex
		var wg sync.WaitGroup
		round := time.Since(cutAt)
		for i, m := range l.Managers() {
			wg.Go(func() {
				st, err := l.Status(m)
				mu.Lock()
				defer mu.Unlock()
				seen[i] = fmt.Sprintf("%s: %s term %d (err %v)", m.Name, st.State, st.Term, err)
				switch {
				case err != nil:
				case m == old && st.State != "Leader" && steppedDown == 0:
					steppedDown = round
				case m != old && st.State == "Leader" && st.Term > oldSt.Term && newLeader == nil:
					newLeader, newTerm, elected = m, st.Term, round
				}
			})
		}
		wg.Wait()
		return newLeader != nil && steppedDown != 0
	}); err != nil {
		t.Fatalf("%v: last seen %v", err, seen)
	}
	if bound := electionBound(timing); elected > bound {
		t.Errorf("new leader %s after %v, want within %v", newLeader.Name, elected, bound)
	}
	if bound := electionBound(timing); steppedDown > bound {
		t.Errorf("the old leader %s stepped down after %v, want within %v", old.Name, steppedDown, bound)
	}
	// The old leader, cut off, must not acknowledge a write.
	oc := l.Client(old)
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Second)
	err = h.put(wctx, oc, 100, "k0", "from-the-cut-off-leader")
	wcancel()
	if err == nil {
		t.Errorf("the cut-off old leader %s acknowledged a write", old.Name)
	}
	mark := h.acked.Load()
	testpoll.Until(t, "writes while the old leader is cut off", 20*time.Second, 50*time.Millisecond, func() bool { return h.acked.Load() >= mark+10 })

	if err := l.Rejoin(old, others...); err != nil {
		t.Fatal(err)
	}
	mark = h.acked.Load()
	testpoll.Until(t, "writes after healing", 20*time.Second, 50*time.Millisecond, func() bool { return h.acked.Load() >= mark+10 })
	if err := l.WaitFormed(20 * time.Second); err != nil {
		t.Fatal(err)
	}
	stopClients()

	// Every manager, read after healing, holds every key's last write: a
	// lost acknowledged write makes these reads fail the check.
	for i, m := range l.Managers() {
		c := l.Client(m)
		for _, k := range keys {
			var err error
			lab.WaitFor(10*time.Second, "a read", func() bool {
				rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer rcancel()
				err = h.get(rctx, c, 200+i, k)
				return err == nil
			})
			if err != nil {
				t.Errorf("reading %s through %s after healing: %v", k, m.Name, err)
			}
		}
	}
	_, final, err := l.Leader()
	if err != nil {
		t.Fatal(err)
	}
	res, info := porcupine.CheckOperationsVerbose(regmodel.Model, h.ops, 30*time.Second)
	if res != porcupine.Ok {
		t.Errorf("history of %d operations is not linearizable (%v)", len(h.ops), res)
		if res == porcupine.Illegal {
			t.Logf("%d partial linearizations", len(info.PartialLinearizations()))
		}
	}
	t.Logf("leader partition: %d operations (%d acknowledged writes, %d reads); %s led term %d, %s led term %d after %v (old stepped down after %v); final term %d: %d elections",
		len(h.ops), h.acked.Load(), h.reads.Load(), old.Name, oldSt.Term, newLeader.Name, newTerm, elected.Round(time.Millisecond),
		steppedDown.Round(time.Millisecond), final.Term, final.Term-oldSt.Term)
}
