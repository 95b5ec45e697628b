package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// An event up to the version the cache's reading listed at may be in
// that reading's publication without being noted as a change (its value
// came with the reading): a stream resuming from it would miss what the
// reading took in after it. So no point at or before the reading is
// marked; one after it is, and resumes from the generation before the
// one that published it.
func TestResumeMarksOnlyEventsAfterTheReading(t *testing.T) {
	t.Parallel()
	st := openStoreWithHistory(t, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ns := &legion.Namespace{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNamespace,
		Metadata: legion.Metadata{Name: "shop"}}}
	if _, _, err := st.Put(ctx, ns, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	c := New(Fixed(st), Options{}).cacheOf(st)
	if err := c.sync(ctx); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	listed := c.loadedAt
	if listed == 0 {
		t.Fatal("the cache's reading records no version")
	}
	const term = 7
	c.take(store.Event{Type: store.Modified, Version: listed, Term: term, Object: ns})
	if _, ok := c.markedGen(listed, term); ok {
		t.Fatalf("an event at the reading's version %d is a point to resume from", listed)
	}
	gen := c.gen + 1 // the publication the next event goes out in
	c.take(store.Event{Type: store.Modified, Version: listed + 1, Term: term, Object: ns})
	if g, ok := c.markedGen(listed+1, term); !ok || g != gen-1 {
		t.Fatalf("the event after the reading: generation %d (%v), want %d", g, ok, gen-1)
	}
	if _, ok := c.markedGen(listed+1, term+1); ok {
		t.Fatal("a point of another term is one to resume from")
	}
}
