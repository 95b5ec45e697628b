package endpoints

import (
	"encoding/json"
	"iter"
	"slices"

	"github.com/legionbsd/legion/internal/jsonfast"
)

// MemberChunk is how many members a list made by MembersOf holds in each
// chunk; a list made elsewhere (MemberChunks) has chunks of its own size.
const MemberChunk = 256

// MemberList is policy members in order, held in chunks, and never
// changed once made. An agent of a cluster of 20,000 tasks hands a new
// list to the network at every member that comes or goes; as one flat
// slice, that was a copy of 20,000 pointers per change (with the write
// barriers of copying pointers while the collector runs). In chunks, the
// list after a change shares every chunk but the changed one with the
// list before. Its JSON is the members' array.
type MemberList struct {
	chunks [][]*Member
	n      int
}

// MembersOf is a list of ms, in their order. It keeps ms: the caller
// does not change ms afterwards.
func MembersOf(ms []*Member) MemberList {
	var chunks [][]*Member
	for len(ms) > 0 {
		k := min(len(ms), MemberChunk)
		chunks = append(chunks, slices.Clip(ms[:k]))
		ms = ms[k:]
	}
	return MemberChunks(chunks)
}

// MemberChunks is a list of the chunks' members, in their order. It keeps
// chunks and what they hold: the caller does not change either
// afterwards.
func MemberChunks(chunks [][]*Member) MemberList {
	l := MemberList{chunks: chunks[:0]}
	for _, c := range chunks {
		if len(c) > 0 {
			l.chunks = append(l.chunks, c)
			l.n += len(c)
		}
	}
	return l
}

// Len is how many members the list holds.
func (l MemberList) Len() int { return l.n }

// IsZero reports an empty list (omitted from JSON with omitzero).
func (l MemberList) IsZero() bool { return l.n == 0 }

// All yields the members in order.
func (l MemberList) All() iter.Seq[*Member] {
	return func(yield func(*Member) bool) {
		for _, c := range l.chunks {
			for _, m := range c {
				if !yield(m) {
					return
				}
			}
		}
	}
}

// Slice is the members as one slice of their own.
func (l MemberList) Slice() []*Member {
	out := make([]*Member, 0, l.n)
	for _, c := range l.chunks {
		out = append(out, c...)
	}
	return out
}

// Equal reports whether both lists hold equal members in the same order,
// however they are chunked.
func (l MemberList) Equal(o MemberList) bool {
	if l.n != o.n {
		return false
	}
	next, stop := iter.Pull(o.All())
	defer stop()
	for m := range l.All() {
		p, _ := next()
		if (m == nil) != (p == nil) || m != nil && *m != *p {
			return false
		}
	}
	return true
}

// MarshalJSON writes the members' array.
func (l MemberList) MarshalJSON() ([]byte, error) { return json.Marshal(l.Slice()) }

// UnmarshalJSON reads the members' array (null: none).
func (l *MemberList) UnmarshalJSON(data []byte) error {
	var ms []*Member
	if err := jsonfast.Unmarshal(data, &ms); err != nil {
		return err
	}
	*l = MembersOf(ms)
	return nil
}
