package dispatcherclient

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

// itemKey is the managers' key of an item named by two names: joined by
// a NUL byte, so keys sort as the whole set's lists do.
func itemKey(a, b string) string { return a + "\x00" + b }

// keyed is one part of the assignments by key, decoded, with its keys in
// order once asked.
type keyed[T any] struct {
	items map[string]T
	keys  []string // sorted; nil when stale
}

func newKeyed[T any]() *keyed[T] { return &keyed[T]{items: map[string]T{}} }

func (k *keyed[T]) set(key string, v T) {
	if _, ok := k.items[key]; !ok {
		k.keys = nil
	}
	k.items[key] = v
}

// apply takes a part's changes, decoding each item put.
func (k *keyed[T]) apply(it *legionpb.Items, what string, decode func([]byte) (T, error)) error {
	if it == nil {
		return nil
	}
	if it.GetReplace() {
		k.items, k.keys = map[string]T{}, nil
	}
	for key, raw := range it.GetPut() {
		v, err := decode(raw)
		if err != nil {
			return fmt.Errorf("%s %q: %w", what, key, err)
		}
		k.set(key, v)
	}
	for _, key := range it.GetRemoved() {
		if _, ok := k.items[key]; ok {
			delete(k.items, key)
			k.keys = nil
		}
	}
	return nil
}

// list is the items in key order, nil when there are none.
func (k *keyed[T]) list() []T {
	if len(k.items) == 0 {
		return nil
	}
	if k.keys == nil {
		k.keys = make([]string, 0, len(k.items))
		for key := range k.items {
			k.keys = append(k.keys, key)
		}
		sort.Strings(k.keys)
	}
	out := make([]T, len(k.keys))
	for i, key := range k.keys {
		out[i] = k.items[key]
	}
	return out
}

// nonNil is l, or an empty list when l is nil: a whole set's JSON lists
// decode to empty lists.
func nonNil[T any](l []T) []T {
	if l == nil {
		return []T{}
	}
	return l
}

// state is the node's assignments as followed on one stream: a whole set
// and the changes after it.
type state struct {
	tasks     *keyed[*legion.Task]
	values    map[string][]byte
	volumes   *keyed[*legion.Volume]
	endpoints *keyed[endpoints.Service]
	peers     *keyed[endpoints.Peer]
	routes    *keyed[endpoints.Route]
	members   *keyed[endpoints.Member]
	rules     endpoints.Policies // isolation and policies only
	// hasPeers and hasPolicies: the whole set carried them (a manager
	// that sends none leaves wg0 and the firewall as they are).
	hasPeers, hasPolicies bool
}

// stateOf is the state a whole set starts.
func stateOf(as agent.Assignments) *state {
	s := &state{tasks: newKeyed[*legion.Task](), values: maps.Clone(as.Values), volumes: newKeyed[*legion.Volume](),
		endpoints: newKeyed[endpoints.Service](), peers: newKeyed[endpoints.Peer](), routes: newKeyed[endpoints.Route](),
		members: newKeyed[endpoints.Member](), hasPeers: as.Peers != nil, hasPolicies: as.Policies != nil}
	if s.values == nil {
		s.values = map[string][]byte{}
	}
	for _, t := range as.Tasks {
		s.tasks.set(itemKey(t.Metadata.Namespace, t.Metadata.Name), t)
	}
	for _, v := range as.Volumes {
		s.volumes.set(itemKey(v.Metadata.Namespace, v.Metadata.Name), v)
	}
	for _, e := range as.Endpoints {
		s.endpoints.set(itemKey(e.Namespace, e.Name), e)
	}
	for _, p := range as.Peers {
		s.peers.set(p.Name, p)
	}
	for _, r := range as.Routes {
		s.routes.set(itemKey(r.Namespace, r.Name), r)
	}
	if p := as.Policies; p != nil {
		s.rules = endpoints.Policies{Isolation: p.Isolation, Policies: p.Policies}
		for _, m := range p.Members {
			s.members.set(itemKey(m.Namespace, m.Task), m)
		}
	}
	return s
}

// apply takes a delta. On an error the state is not to be used again:
// the stream is opened anew, which starts with a whole set.
func (s *state) apply(set *legionpb.AssignmentSet) error {
	at := set.GetVersion()
	wrap := func(err error) error {
		if err != nil {
			return fmt.Errorf("assignment changes at version %d: %w", at, err)
		}
		return nil
	}
	if err := s.tasks.apply(set.GetTaskChanges(), "task", decodeTask); err != nil {
		return wrap(err)
	}
	if it := set.GetValueChanges(); it != nil {
		if it.GetReplace() {
			s.values = map[string][]byte{}
		}
		maps.Copy(s.values, it.GetPut())
		for _, k := range it.GetRemoved() {
			delete(s.values, k)
		}
	}
	if err := s.volumes.apply(set.GetVolumeChanges(), "volume", decodeVolume); err != nil {
		return wrap(err)
	}
	if err := s.endpoints.apply(set.GetEndpointChanges(), "endpoints", decodeJSON[endpoints.Service]); err != nil {
		return wrap(err)
	}
	if set.GetPeerChanges() != nil {
		s.hasPeers = true
	}
	if err := s.peers.apply(set.GetPeerChanges(), "peer", decodeJSON[endpoints.Peer]); err != nil {
		return wrap(err)
	}
	if err := s.routes.apply(set.GetRouteChanges(), "route", decodeJSON[endpoints.Route]); err != nil {
		return wrap(err)
	}
	if raw := set.GetPolicyRules(); len(raw) > 0 {
		var p endpoints.Policies
		if err := json.Unmarshal(raw, &p); err != nil {
			return wrap(fmt.Errorf("policy rules: %w", err))
		}
		s.rules, s.hasPolicies = endpoints.Policies{Isolation: p.Isolation, Policies: p.Policies}, true
	}
	if set.GetMemberChanges() != nil {
		s.hasPolicies = true
	}
	return wrap(s.members.apply(set.GetMemberChanges(), "policy member", decodeJSON[endpoints.Member]))
}

// assignments is the state as the agent takes it: what a whole set of
// the same content decodes to.
func (s *state) assignments() agent.Assignments {
	as := agent.Assignments{Tasks: nonNil(s.tasks.list()), Values: maps.Clone(s.values), Volumes: s.volumes.list(),
		Endpoints: nonNil(s.endpoints.list()), Routes: nonNil(s.routes.list())}
	if s.hasPeers {
		as.Peers = nonNil(s.peers.list())
	}
	if s.hasPolicies {
		as.Policies = &endpoints.Policies{Isolation: s.rules.Isolation, Policies: s.rules.Policies, Members: s.members.list()}
	}
	return as
}

func decodeTask(raw []byte) (*legion.Task, error) {
	o, err := legion.FromJSON(raw)
	if err != nil {
		return nil, err
	}
	t, ok := o.(*legion.Task)
	if !ok {
		return nil, fmt.Errorf("expected a Task, got a %s", o.GetKind())
	}
	return t, nil
}

func decodeJSON[T any](raw []byte) (T, error) {
	var v T
	err := json.Unmarshal(raw, &v)
	return v, err
}
