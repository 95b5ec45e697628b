package endpoints

import (
	"cmp"
	"encoding/json"
	"iter"
	"slices"
	"strings"

	"github.com/legionbsd/legion/internal/jsonfast"
)

// MemberChunk is how many members a list made by MembersOf holds in each
// chunk; a list made elsewhere (MemberChunks) has chunks of its own size.
const MemberChunk = 256

// MemberList is policy members, held in parts never changed once made:
// chunks of members, and services, each of whose ready tasks stands for
// a member of its namespace and service. An agent of a cluster of 20,000
// tasks hands a new list to the network at every member that comes or
// goes; as one flat slice, that was a copy of 20,000 pointers per change
// (with the write barriers of copying pointers while the collector
// runs). In parts, the list after a change shares every part but the
// changed ones with the list before, and the services are the very list
// of endpoints handed over beside it, so a rollout's tasks becoming
// ready, or not, cost the members nothing of their own.
//
// Its order is the chunks' members, then each service's tasks: a list
// the managers make is in key order (namespace, task), one an agent
// holds may not be, and Equal does not look at the order. Its JSON is
// the members' array.
type MemberList struct {
	chunks   [][]*Member
	services []*Service
	n        int
}

// memberOf is the member that ready task t of service s stands for.
func memberOf(s *Service, t *Task) Member {
	return Member{Namespace: s.Namespace, Service: s.Name, Task: t.Name, IP: t.IP, Node: t.Node}
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

// WithServices is l and the members the services' ready tasks stand
// for, after l's. It keeps services and what they hold: the caller does
// not change either afterwards.
func (l MemberList) WithServices(services []*Service) MemberList {
	out := l
	if len(l.services) == 0 {
		out.services = services
	} else {
		out.services = slices.Concat(l.services, services)
	}
	for _, s := range services {
		out.n += len(s.Tasks)
	}
	return out
}

// Len is how many members the list holds.
func (l MemberList) Len() int { return l.n }

// IsZero reports an empty list (omitted from JSON with omitzero).
func (l MemberList) IsZero() bool { return l.n == 0 }

// All yields the members in the list's order.
func (l MemberList) All() iter.Seq[Member] {
	return func(yield func(Member) bool) {
		for _, c := range l.chunks {
			for _, m := range c {
				if !yield(*m) {
					return
				}
			}
		}
		for _, s := range l.services {
			for _, t := range s.Tasks {
				if !yield(memberOf(s, t)) {
					return
				}
			}
		}
	}
}

// Slice is the members as one slice of their own, in the list's order.
func (l MemberList) Slice() []*Member {
	out := make([]*Member, 0, l.n)
	for _, c := range l.chunks {
		out = append(out, c...)
	}
	if len(l.services) > 0 {
		made := make([]Member, 0, l.n-len(out))
		for _, s := range l.services {
			for _, t := range s.Tasks {
				made = append(made, memberOf(s, t))
				out = append(out, &made[len(made)-1])
			}
		}
	}
	return out
}

// Equal reports whether both lists hold equal members, in whatever order
// and parts.
func (l MemberList) Equal(o MemberList) bool {
	if l.n != o.n {
		return false
	}
	a, b := l.sorted(), o.sorted()
	return slices.Equal(a, b)
}

// sorted is the members' values in key order.
func (l MemberList) sorted() []Member {
	out := slices.Collect(l.All())
	slices.SortFunc(out, func(a, b Member) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Task, b.Task),
			strings.Compare(a.Service, b.Service), strings.Compare(a.IP, b.IP), strings.Compare(a.Node, b.Node))
	})
	return out
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
