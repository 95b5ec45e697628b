package server

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/regmodel"
)

func TestLinearizableWhileLeadersAreKilled(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("kills leaders for a few seconds")
	}
	ms, _ := threeManagers(t)
	defer stopAll(ms)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) }

	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(op porcupine.Operation) {
		mu.Lock()
		history = append(history, op)
		mu.Unlock()
	}
	// Clients run until the leaders were killed and enough succeeded
	// after, or at most 20 s on a loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var seq atomic.Int64
	var wg sync.WaitGroup
	keys := []string{"k0", "k1", "k2"}
	var okOps atomic.Int64
	for id := range 6 {
		c, err := client.New(client.Options{Server: ms[id%3].addr, CredentialsFile: ms[0].dir + "/" + AdminFile, Retry: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				key := keys[(id+i)%len(keys)]
				octx, ocancel := context.WithTimeout(ctx, 2*time.Second)
				call := now()
				if i%2 == 0 {
					v := fmt.Sprintf("v%d", seq.Add(1))
					_, err := c.ApplyOne(octx, configObj("default", key, v), client.ApplyOptions{})
					ret := now()
					if err != nil {
						// The write may or may not have applied: it may
						// take effect at any time after its call.
						ret = math.MaxInt64
					} else {
						okOps.Add(1)
					}
					record(porcupine.Operation{ClientId: id, Input: regmodel.Input{Put: true, Key: key, Value: v}, Call: call, Output: regmodel.Output{}, Return: ret})
				} else {
					o, err := c.Get(octx, legion.KindConfig, "default", key)
					ret := now()
					switch {
					case err == nil:
						okOps.Add(1)
						record(porcupine.Operation{ClientId: id, Input: regmodel.Input{Key: key}, Call: call,
							Output: regmodel.Output{Value: string(o.(*legion.Config).Spec.Data)}, Return: ret})
					case client.Code(err).String() == "NotFound":
						record(porcupine.Operation{ClientId: id, Input: regmodel.Input{Key: key}, Call: call, Output: regmodel.Output{}, Return: ret})
					}
				}
				ocancel()
			}
		}()
	}
	// Kill the leader twice, bringing each back from its disk.
	kills := 0
	var events []string
	for ctx.Err() == nil && kills < 2 {
		mark := okOps.Load()
		waitFor(t, "operations between kills", 20*time.Second, func() bool { return okOps.Load() >= mark+10 || ctx.Err() != nil })
		select {
		case <-ctx.Done():
		case <-time.After(900 * time.Millisecond):
		}
		if ctx.Err() != nil {
			break
		}
		l := leaderOf(t, ms)
		killedAt := now()
		l.kill()
		kills++
		time.Sleep(300 * time.Millisecond) // the cluster runs without it for a while
		l.restart()
		events = append(events, fmt.Sprintf("leader %s killed at %s, restarted at %s", l.addr, ms3(killedAt), ms3(now())))
	}
	mark := okOps.Load()
	waitFor(t, "operations after the kills", 20*time.Second, func() bool { return okOps.Load() >= mark+20 || ctx.Err() != nil })
	cancel()
	wg.Wait()
	if kills == 0 || okOps.Load() < 20 {
		t.Fatalf("too little happened: %d kills, %d successful operations", kills, okOps.Load())
	}
	res := porcupine.CheckOperationsTimeout(regmodel.Model, history, 20*time.Second)
	if res != porcupine.Ok {
		logIllegal(t, history, events)
		t.Fatalf("history of %d operations is not linearizable (%v)", len(history), res)
	}
	t.Logf("%d operations (%d succeeded), %d leaders killed: linearizable", len(history), okOps.Load(), kills)
}

// logIllegal logs, for the next engineer, the kills and the operations of
// each key whose history alone is not linearizable, in call order.
func logIllegal(t *testing.T, history []porcupine.Operation, events []string) {
	for _, e := range events {
		t.Log(e)
	}
	for _, part := range regmodel.Model.Partition(history) {
		if porcupine.CheckOperationsTimeout(regmodel.Model, part, 20*time.Second) == porcupine.Ok {
			continue
		}
		slices.SortFunc(part, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
		for _, op := range part {
			ret := "never answered"
			if op.Return != math.MaxInt64 {
				ret = ms3(op.Return)
			}
			t.Logf("client %d %s: %s to %s", op.ClientId, regmodel.Model.DescribeOperation(op.Input, op.Output), ms3(op.Call), ret)
		}
	}
}

// ms3 is a time since the test's start in milliseconds.
func ms3(ns int64) string { return fmt.Sprintf("%.3f ms", float64(ns)/1e6) }
