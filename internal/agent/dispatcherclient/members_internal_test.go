package dispatcherclient

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// TestMemberSetFollowsAModel puts and removes members across many
// chunks, one at a time and a message at a time, and checks the set
// against a map after each step: the list in key order, the chunks
// within their bounds, and no list handed over ever changed afterwards.
func TestMemberSetFollowsAModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s := newMemberSet()
	model := map[string]*endpoints.Member{}
	const space = 3000 // keys: several chunks of endpoints.MemberChunk (and past it, by rollouts)
	key := func() string { return itemKey("ns", fmt.Sprintf("t%05d", rng.IntN(space))) }
	member := func(k string, i int) *endpoints.Member {
		return &endpoints.Member{Namespace: "ns", Task: k[len("ns\x00"):], IP: fmt.Sprintf("10.0.%d.%d", i/250%250, i%250)}
	}
	type handed struct {
		list endpoints.MemberList
		was  []endpoints.Member // the members' values when handed over
	}
	var lists []handed
	most := 0 // chunks
	values := func(l endpoints.MemberList) []endpoints.Member {
		var out []endpoints.Member
		for m := range l.All() {
			out = append(out, m)
		}
		return out
	}
	check := func(step int) {
		t.Helper()
		keys := slices.Sorted(maps.Keys(model))
		got := s.list()
		if got.Len() != len(keys) || s.len() != len(keys) {
			t.Fatalf("step %d: %d members listed, %d counted, %d in the model", step, got.Len(), s.len(), len(keys))
		}
		i := 0
		for m := range got.All() {
			if want := model[keys[i]]; m != *want {
				t.Fatalf("step %d: member %d is %+v, want %+v", step, i, m, want)
			}
			i++
		}
		most = max(most, len(s.chunks))
		last := ""
		for ci, c := range s.chunks {
			if len(c.keys) == 0 || len(c.keys) > 2*endpoints.MemberChunk || len(c.keys) != len(c.vals) {
				t.Fatalf("step %d: chunk %d holds %d keys and %d members", step, ci, len(c.keys), len(c.vals))
			}
			if c.keys[0] <= last {
				t.Fatalf("step %d: chunk %d starts at %q, after %q", step, ci, c.keys[0], last)
			}
			last = c.keys[len(c.keys)-1]
		}
	}
	for i := range 12000 {
		switch rng.IntN(8) {
		case 0, 1, 2:
			k := key()
			m := member(k, i)
			s.set(k, m)
			model[k] = m
		case 3:
			k := key()
			s.remove(k)
			delete(model, k)
		case 4:
			l := s.list()
			lists = append(lists, handed{l, values(l)})
		case 5, 6:
			it := &legionpb.Items{Replace: rng.IntN(1000) == 0}
			put := map[string][]byte{}
			// Values as JSON, or typed in the wire format.
			typed := rng.IntN(2) == 0
			encode := func(m *endpoints.Member) ([]byte, error) { return json.Marshal(m) }
			if typed {
				encode = func(m *endpoints.Member) ([]byte, error) { return endpoints.MemberWire(m), nil }
			}
			if it.Replace {
				clear(model)
			}
			// Keys may be put and removed in one message (removed it is),
			// and removed twice.
			n, next := rng.IntN(60), key
			gone := false // every key of the message removed
			if r := rng.IntN(20); r < 2 {
				// A rollout's message: hundreds of keys side by side, more
				// than a chunk holds, into chunks held or past the last.
				first := rng.IntN(space)
				n, next = 300+rng.IntN(500), func() string {
					first++
					return itemKey("ns", fmt.Sprintf("t%05d", first))
				}
				// Or its end: the old keys removed, whole chunks of them.
				gone = r == 1
			}
			for range n {
				k := next()
				if !gone && rng.IntN(3) > 0 {
					m := member(k, i)
					data, err := encode(m)
					if err != nil {
						t.Fatal(err)
					}
					put[k] = data
					model[k] = m
				} else {
					it.Removed = append(it.Removed, k)
				}
			}
			for _, k := range it.Removed {
				delete(model, k)
			}
			it.Put = legionpb.ItemsPut(put)
			if err := s.apply(it, typed); err != nil {
				t.Fatal(err)
			}
			// Decoded members are new pointers: the model takes them (and
			// only for the keys it holds, so that one held by mistake
			// shows).
			for m := range s.list().All() {
				if k := itemKey(m.Namespace, m.Task); model[k] != nil {
					model[k] = &m
				}
			}
		case 7:
			check(i)
		}
	}
	check(-1)
	if most < 4 {
		t.Fatalf("the set grew to %d chunks at most; the test means to cross several", most)
	}
	for i, h := range lists {
		if !slices.Equal(values(h.list), h.was) {
			t.Fatalf("list %d was written after it was handed over", i)
		}
	}
}

// BenchmarkMemberSetChangeThenHandOver is one member of 20,000 put, then
// the list handed over: what it costs an agent per change in a rollout.
func BenchmarkMemberSetChangeThenHandOver(b *testing.B) {
	s := newMemberSet()
	for i := range 20000 {
		s.set(itemKey("ns", fmt.Sprintf("t%05d", i)), &endpoints.Member{Namespace: "ns", Task: fmt.Sprintf("t%05d", i)})
	}
	b.ResetTimer()
	for i := range b.N {
		k := fmt.Sprintf("t%05d", i*7919%20000)
		s.set(itemKey("ns", k), &endpoints.Member{Namespace: "ns", Task: k, IP: "10.0.0.1"})
		if s.list().Len() != 20000 {
			b.Fatal("members lost")
		}
	}
}
