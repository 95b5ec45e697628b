package dispatcher

import (
	"context"
	"sort"
	"time"

	"github.com/legionbsd/legion/cluster/store"
)

// A stream that ends (its manager died, lost its leader, or the agent
// moved) used to start again with a whole set: after a leader's loss in
// a cluster of 20,000 tasks, about 3.4 MB to each of the hundred or so
// nodes that moved at once. An agent instead says where its state is (the
// version and term of its last message), and a manager whose cache saw
// that point sends what changed since as the stream's first message.
//
// The point is a store version and the Raft term of its entry, which name
// one point of one history, whichever replica the cache follows. Each
// cache notes the generation that published each event it took (marks);
// the changes of every part after the generation before it hold every
// change after the point, and some from just before it, which put what
// the agent holds already.

// Follow starts the stream cache of st now, not at its first stream: a
// cache notes only what it takes after its first reading, so one started
// by the first stream that fails over here could resume none of them.
// A manager calls it once its store is open.
func (s *Service) Follow(st *store.Store) { s.cacheOf(st) }

// resumeMarks bounds the events a cache remembers for resuming: at a
// rollout's few thousand events a second, most of a minute. An agent
// further behind gets a whole set.
const resumeMarks = 1 << 16

// mark is an event the cache took: its version and term, and the
// generation that published it.
type mark struct {
	version, term, gen uint64
}

// noteMark records an event of a batch about to be published as gen.
// Called with mu held.
func (c *viewCache) noteMark(version, term, gen uint64) {
	if term == 0 {
		return // a reading: no point of the history to resume from
	}
	c.marks = append(c.marks, mark{version, term, gen})
	if len(c.marks) > resumeMarks {
		c.marks = append([]mark(nil), c.marks[len(c.marks)-resumeMarks/2:]...)
	}
}

// resumeGen is the generation a stream resuming from the point (version,
// term) goes on from, once the cache has taken that point; ok is false
// when the cache cannot tell what changed since: it did not see the
// point (it read the store after it, or forgot it), the term differs
// (another history), or it did not get there within an election's bound
// (Store.ElectionBound). The point may be ahead of this replica: the
// leader the agent followed had applied entries this replica learns are
// committed only from the next leader, and a busy cache trails its
// replica; waiting costs less than a whole set.
func (c *viewCache) resumeGen(ctx context.Context, version, term uint64) (gen uint64, ok bool) {
	if version == 0 || term == 0 {
		return 0, false
	}
	deadline := time.NewTimer(c.st.ElectionBound())
	defer deadline.Stop()
	for {
		c.mu.Lock()
		at, ch, err := c.at, c.changed, c.err
		if err == nil && at >= version {
			gen, ok = c.markedGen(version, term)
			c.mu.Unlock()
			return gen, ok
		}
		c.mu.Unlock()
		if err != nil {
			return 0, false
		}
		select {
		case <-ch:
		case <-deadline.C:
			return 0, false
		case <-ctx.Done():
			return 0, false
		}
	}
}

// markedGen is the generation before the one that published the event at
// version, when the cache noted it with that term. Called with mu held.
func (c *viewCache) markedGen(version, term uint64) (uint64, bool) {
	i := sort.Search(len(c.marks), func(i int) bool { return c.marks[i].version >= version })
	if i == len(c.marks) || c.marks[i].version != version || c.marks[i].term != term {
		return 0, false
	}
	// Changes noted at the publishing generation may come before the
	// point or after it: they are all sent.
	return c.marks[i].gen - 1, true
}
