package dispatcherclient

import (
	"slices"

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

type memberChunk struct {
	keys []string // sorted; never handed over, so written in place
	vals []*endpoints.Member
	// shared: vals was handed over, so a change writes a copy.
	shared bool
}

func newMemberSet() *memberSet { return &memberSet{} }

func (s *memberSet) len() int { return s.n }

// chunk is the index of the chunk where key is or would go.
func (s *memberSet) chunk(key string) int {
	i, _ := slices.BinarySearchFunc(s.chunks, key, func(c *memberChunk, key string) int {
		switch last := c.keys[len(c.keys)-1]; {
		case last < key:
			return -1
		case last > key:
			return 1
		}
		return 0
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
	if n := len(c.keys); n == 0 || c.keys[n-1] < key {
		// Past the end of the last chunk: what a whole set gives, in key
		// order, fills chunks one after the other.
		if n >= endpoints.MemberChunk && ci == len(s.chunks)-1 {
			s.chunks = append(s.chunks, &memberChunk{keys: []string{key}, vals: []*endpoints.Member{m}})
			s.n++
			return
		}
	}
	i, found := slices.BinarySearch(c.keys, key)
	if found {
		c.own()
		c.vals[i] = m
		return
	}
	c.keys = slices.Insert(c.keys, i, key)
	if c.shared {
		vals := make([]*endpoints.Member, len(c.vals)+1, len(c.vals)+1+len(c.vals)/8)
		copy(vals, c.vals[:i])
		vals[i] = m
		copy(vals[i+1:], c.vals[i:])
		c.vals, c.shared = vals, false
	} else {
		c.vals = slices.Insert(c.vals, i, m)
	}
	s.n++
	if len(c.keys) > 2*endpoints.MemberChunk {
		// Split in two; each half is a chunk of its own from here.
		h := len(c.keys) / 2
		right := &memberChunk{keys: slices.Clone(c.keys[h:]), vals: slices.Clone(c.vals[h:])}
		left := &memberChunk{keys: slices.Clip(c.keys[:h]), vals: slices.Clip(c.vals[:h])}
		s.chunks = slices.Replace(s.chunks, ci, ci+1, left, right)
	}
}

// own makes the chunk's vals its own to write.
func (c *memberChunk) own() {
	if c.shared {
		c.vals, c.shared = slices.Clone(c.vals), false
	}
}

func (s *memberSet) remove(key string) {
	if len(s.chunks) == 0 {
		return
	}
	ci := s.chunk(key)
	c := s.chunks[ci]
	i, found := slices.BinarySearch(c.keys, key)
	if !found {
		return
	}
	s.out = nil
	s.n--
	if len(c.keys) == 1 {
		s.chunks = slices.Delete(s.chunks, ci, ci+1)
		return
	}
	c.keys = slices.Delete(c.keys, i, i+1)
	if c.shared {
		vals := make([]*endpoints.Member, len(c.vals)-1)
		copy(vals, c.vals[:i])
		copy(vals[i:], c.vals[i+1:])
		c.vals, c.shared = vals, false
	} else {
		c.vals = slices.Delete(c.vals, i, i+1)
	}
}

// apply takes the part's changes, decoding each member put.
func (s *memberSet) apply(it *legionpb.Items) error {
	if it == nil {
		return nil
	}
	keys, vals, err := decodeItems(it, "policy member", decodeJSON[*endpoints.Member])
	if err != nil {
		return err
	}
	if it.GetReplace() {
		*s = memberSet{}
	}
	for i, key := range keys {
		s.set(key, vals[i])
	}
	for _, key := range it.GetRemoved() {
		s.remove(key)
	}
	return nil
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
