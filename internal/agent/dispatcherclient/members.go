package dispatcherclient

import (
	"slices"
	"strings"

	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// memberSet is the policy members by key, decoded, in chunks of at most
// 2*endpoints.MemberChunk (see endpoints.MemberList): a hand-over lists
// the chunks, and a change after it copies the one chunk it touches, not
// the cluster's 20,000 members.
type memberSet struct {
	chunks []*memberChunk // in key order, none empty
	n      int
	out    *endpoints.MemberList // the list last handed over, until a change
}

// memberChunk is one chunk: a keyed part of its own, whose vals are
// handed over and copied on the first change after.
type memberChunk = keyed[*endpoints.Member]

func newMemberSet() *memberSet { return &memberSet{} }

func (s *memberSet) len() int { return s.n }

// chunk is the index of the chunk where key is or would go.
func (s *memberSet) chunk(key string) int {
	i, _ := slices.BinarySearchFunc(s.chunks, key, func(c *memberChunk, key string) int {
		return strings.Compare(c.keys[len(c.keys)-1], key)
	})
	return min(i, len(s.chunks)-1)
}

func (s *memberSet) set(key string, m *endpoints.Member) {
	s.out = nil
	if len(s.chunks) == 0 {
		s.chunks, s.n = []*memberChunk{{keys: []string{key}, vals: []*endpoints.Member{m}}}, 1
		return
	}
	ci := s.chunk(key)
	c := s.chunks[ci]
	if n := c.len(); n >= endpoints.MemberChunk && ci == len(s.chunks)-1 && c.keys[n-1] < key {
		// Past the end of a full last chunk: what a whole set gives, in
		// key order, fills chunks one after the other.
		s.chunks = append(s.chunks, &memberChunk{keys: []string{key}, vals: []*endpoints.Member{m}})
		s.n++
		return
	}
	before := c.len()
	c.set(key, m)
	s.n += c.len() - before
	if c.len() > 2*endpoints.MemberChunk {
		// Split in two; each half is a chunk of its own from here.
		h := c.len() / 2
		right := &memberChunk{keys: slices.Clone(c.keys[h:]), vals: slices.Clone(c.vals[h:])}
		left := &memberChunk{keys: slices.Clip(c.keys[:h]), vals: slices.Clip(c.vals[:h])}
		s.chunks = slices.Replace(s.chunks, ci, ci+1, left, right)
	}
}

// setAll puts members by key, keys in order and each once: each chunk's
// run of them is merged in one pass (keyed.setAll), not inserted one at a
// time, moving the chunk's members once per message instead of once per
// member put.
func (s *memberSet) setAll(keys []string, vals []*endpoints.Member) {
	if len(keys) <= 1 || len(s.chunks) == 0 {
		for i, k := range keys {
			s.set(k, vals[i])
		}
		return
	}
	s.out = nil
	// From the last chunk: a chunk split does not move the ones before it.
	for _, r := range slices.Backward(s.runs(keys)) {
		c := s.chunks[r.ci]
		before := c.len()
		c.setAll(keys[r.from:r.to], vals[r.from:r.to])
		s.n += c.len() - before
		if c.len() > 2*endpoints.MemberChunk {
			s.chunks = slices.Replace(s.chunks, r.ci, r.ci+1, split(c)...)
		}
	}
}

// chunkRun is a run of keys, keys[from:to], that falls in chunk ci.
type chunkRun struct{ ci, from, to int }

// runs splits keys, in order, into the runs that fall in each chunk, as
// the chunks are before any of them changes; keys past the last chunk's
// end fall in it.
func (s *memberSet) runs(keys []string) []chunkRun {
	var runs []chunkRun
	for from := 0; from < len(keys); {
		ci, to := s.chunk(keys[from]), len(keys)
		if ci < len(s.chunks)-1 {
			ck := s.chunks[ci].keys
			last := ck[len(ck)-1]
			to = from + 1
			for to < len(keys) && keys[to] <= last {
				to++
			}
		}
		runs = append(runs, chunkRun{ci, from, to})
		from = to
	}
	return runs
}

// split cuts a chunk grown past 2*endpoints.MemberChunk into chunks of
// between one and one and a half times endpoints.MemberChunk.
func split(c *memberChunk) []*memberChunk {
	n := c.len()
	k := n / endpoints.MemberChunk
	out := make([]*memberChunk, 0, k)
	for i := range k {
		from, to := i*n/k, (i+1)*n/k
		out = append(out, &memberChunk{keys: slices.Clone(c.keys[from:to]), vals: slices.Clone(c.vals[from:to])})
	}
	return out
}

// has reports whether key is held.
func (s *memberSet) has(key string) bool {
	if len(s.chunks) == 0 {
		return false
	}
	_, ok := s.chunks[s.chunk(key)].get(key)
	return ok
}

func (s *memberSet) remove(key string) {
	if len(s.chunks) == 0 {
		return
	}
	ci := s.chunk(key)
	c := s.chunks[ci]
	if !c.remove(key) {
		return
	}
	s.out = nil
	s.n--
	if c.len() == 0 {
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
	}
}

// removeAll removes members by key, each chunk's in one pass
// (keyed.removeAll): a rollout's message removes dozens of the members
// kept while their tasks stopped, which fall in a few chunks, and one at
// a time each moved its chunk's members again.
func (s *memberSet) removeAll(keys []string) {
	if len(keys) <= 1 || len(s.chunks) == 0 {
		for _, k := range keys {
			s.remove(k)
		}
		return
	}
	keys = inOrder(keys)
	// From the last chunk: one emptied and dropped does not move the
	// ones before it.
	for _, r := range slices.Backward(s.runs(keys)) {
		c := s.chunks[r.ci]
		before := c.len()
		c.removeAll(keys[r.from:r.to])
		if c.len() == before {
			continue
		}
		s.out = nil
		s.n -= before - c.len()
		if c.len() == 0 {
			s.chunks = slices.Delete(s.chunks, r.ci, r.ci+1)
		}
	}
}

// apply takes the part's changes, decoding each member put: typed (in
// the wire format) or JSON.
func (s *memberSet) apply(it *legionpb.Items, typed bool) error {
	return applyItems(it, "policy member", memberDecoder(typed), func() { *s = memberSet{} }, s.setAll, s.removeAll)
}

// memberDecoder decodes a member's value: typed (in the wire format) or
// JSON.
func memberDecoder(typed bool) func([]byte) (*endpoints.Member, error) {
	if typed {
		return endpoints.MemberFromWire
	}
	return decodeJSON[*endpoints.Member]
}

// drop removes the members of keys, in one pass over the set.
func (s *memberSet) drop(keys map[string]bool) {
	var kept []string
	var vals []*endpoints.Member
	for _, c := range s.chunks {
		for i, k := range c.keys {
			if !keys[k] {
				kept, vals = append(kept, k), append(vals, c.vals[i])
			}
		}
	}
	if len(kept) == s.n {
		return
	}
	*s = memberSet{}
	s.setAll(kept, vals)
}

// list is the members in key order, sharing its chunks with the set
// until they change.
func (s *memberSet) list() endpoints.MemberList {
	if s.out != nil {
		return *s.out
	}
	chunks := make([][]*endpoints.Member, len(s.chunks))
	for i, c := range s.chunks {
		chunks[i] = slices.Clip(c.vals)
		c.shared = true
	}
	l := endpoints.MemberChunks(chunks)
	s.out = &l
	return l
}
