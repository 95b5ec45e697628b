package dispatcherclient

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/internal/jsonfast"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/protobuf/proto"
)

// itemKey is the managers' key of an item named by two names: joined by
// a NUL byte, so keys sort as the whole set's lists do.
func itemKey(a, b string) string { return a + "\x00" + b }

// keyed is one part of the assignments by key, decoded. Its keys are
// kept in order as they come and go (a binary search, not a sort of the
// whole part per hand-over), and its items are handed over as they are
// held: the list is copied only when it changes after a hand-over, in
// the same pass as the change. In a cluster of 20,000 tasks a change
// touches one policy member of 20,000, and a set handed over after it
// costs one copy of that list and none of the lists that did not change.
type keyed[T any] struct {
	keys []string // sorted
	vals []T      // vals[i] is the item of keys[i]
	// shared: vals was handed over, so it is not written again; a change
	// makes a new one. An item appended past its end is not seen by
	// whoever holds it (handed over clipped).
	shared bool
}

func newKeyed[T any]() *keyed[T] { return &keyed[T]{} }

func (k *keyed[T]) get(key string) (T, bool) {
	if i, ok := slices.BinarySearch(k.keys, key); ok {
		return k.vals[i], true
	}
	var zero T
	return zero, false
}

func (k *keyed[T]) set(key string, v T) {
	if n := len(k.keys); n == 0 || k.keys[n-1] < key {
		// What a whole set gives, in key order.
		k.keys, k.vals = append(k.keys, key), append(k.vals, v)
		return
	}
	i, ok := slices.BinarySearch(k.keys, key)
	if ok {
		if k.shared {
			k.vals, k.shared = slices.Clone(k.vals), false
		}
		k.vals[i] = v
		return
	}
	k.keys = slices.Insert(k.keys, i, key)
	k.vals, k.shared = insertAt(k.vals, i, v, k.shared), false
}

// insertAt is s with v inserted at i: in place, or, when s was handed
// over (shared), in a new slice made in one pass.
func insertAt[E any](s []E, i int, v E, shared bool) []E {
	if !shared {
		return slices.Insert(s, i, v)
	}
	out := make([]E, len(s)+1, len(s)+1+len(s)/8)
	copy(out, s[:i])
	out[i] = v
	copy(out[i+1:], s[i:])
	return out
}

// deleteAt is s without its item at i: in place, or, when s was handed
// over (shared), in a new slice.
func deleteAt[E any](s []E, i int, shared bool) []E {
	if !shared {
		return slices.Delete(s, i, i+1)
	}
	out := make([]E, len(s)-1, len(s))
	copy(out, s[:i])
	copy(out[i:], s[i+1:])
	return out
}

func (k *keyed[T]) remove(key string) bool {
	i, ok := slices.BinarySearch(k.keys, key)
	if !ok {
		return false
	}
	k.keys = slices.Delete(k.keys, i, i+1)
	k.vals, k.shared = deleteAt(k.vals, i, k.shared), false
	return true
}

func (k *keyed[T]) len() int { return len(k.keys) }

// setAll puts items by key, keys in order. One key goes in by itself;
// more are merged in one pass. Put one at a time, each would move the
// items after it, and the first would also copy the whole list when it
// was just handed over, as it mostly was.
func (k *keyed[T]) setAll(keys []string, vals []T) {
	if len(keys) <= 1 || len(k.keys) == 0 || k.keys[len(k.keys)-1] < keys[0] {
		for i, key := range keys {
			k.set(key, vals[i])
		}
		return
	}
	// Where each key goes, by binary search from the last one's place;
	// then the held items move once, in blocks: a message's few items
	// cost a search each, not a comparison with each item held.
	pos, found := make([]int, len(keys)), make([]bool, len(keys))
	n, lo := len(k.keys), 0
	for j, key := range keys {
		i, ok := slices.BinarySearch(k.keys[lo:], key)
		pos[j], found[j], lo = lo+i, ok, lo+i
		if !ok {
			n++
		}
	}
	k.keys = putAt(k.keys, keys, pos, found, n, true)
	k.vals = putAt(k.vals, vals, pos, found, n, !k.shared)
	k.shared = false
}

// putAt is held with news[j] put at pos[j] (in place of the item there
// when found[j], else before it), n items in all; written in place when
// it may be and has room.
func putAt[E any](held, news []E, pos []int, found []bool, n int, inPlace bool) []E {
	inPlace = inPlace && cap(held) >= n
	var out []E
	if inPlace {
		out = held[:n]
	} else {
		out = make([]E, n, n+n/8)
	}
	// From the back, so that in place nothing is overwritten before it
	// has moved.
	src, dst := len(held), n
	for j := len(news) - 1; j >= 0; j-- {
		from := pos[j]
		if found[j] {
			from++
		}
		dst -= src - from
		copy(out[dst:], held[from:src])
		dst--
		out[dst] = news[j]
		src = pos[j]
	}
	if !inPlace {
		copy(out, held[:src]) // in place, the items before the first put stay where they are
	}
	return out
}

// removeAll removes keys, more than one in one pass (see setAll).
func (k *keyed[T]) removeAll(keys []string) {
	if len(keys) <= 1 {
		for _, key := range keys {
			k.remove(key)
		}
		return
	}
	var gone []int
	lo := 0
	for _, key := range inOrder(keys) {
		i, ok := slices.BinarySearch(k.keys[lo:], key)
		lo += i
		if ok {
			gone = append(gone, lo)
			lo++
		}
	}
	if len(gone) == 0 {
		return
	}
	k.keys = dropAt(k.keys, gone, true)
	k.vals = dropAt(k.vals, gone, !k.shared)
	k.shared = false
}

// inOrder is keys sorted: as they are when they are (managers send
// removals in key order), else a sorted copy.
func inOrder(keys []string) []string {
	if slices.IsSorted(keys) {
		return keys
	}
	return slices.Sorted(slices.Values(keys))
}

// dropAt is held without the items at the indexes gone (in order), in
// place when it may be.
func dropAt[E any](held []E, gone []int, inPlace bool) []E {
	n := len(held) - len(gone)
	var out []E
	if inPlace {
		out = held[:n]
	} else {
		out = make([]E, n, n+n/8)
		copy(out, held[:gone[0]])
	}
	dst := gone[0]
	for g, i := range gone {
		end := len(held)
		if g+1 < len(gone) {
			end = gone[g+1]
		}
		dst += copy(out[dst:], held[i+1:end])
	}
	if inPlace {
		clear(held[n:]) // what they hold can be collected
	}
	return out
}

// apply takes a part's changes, decoding each item put.
func (k *keyed[T]) apply(it *legionpb.Items, what string, decode func([]byte) (T, error)) error {
	return applyItems(it, what, decode, func() { *k = keyed[T]{} }, k.setAll, k.removeAll)
}

// decodeItems decodes the items put, in key order: as managers send
// them, or sorted here (a manager from before sent a map's order), the
// later of two entries of one key counting.
func decodeItems[T any](it *legionpb.Items, what string, decode func([]byte) (T, error)) ([]string, []T, error) {
	put := inKeyOrder(it.GetPut())
	keys, vals := make([]string, len(put)), make([]T, len(put))
	for i, e := range put {
		v, err := decode(e.GetValue())
		if err != nil {
			return nil, nil, fmt.Errorf("%s %q: %w", what, e.GetKey(), err)
		}
		keys[i], vals[i] = e.GetKey(), v
	}
	return keys, vals, nil
}

// inKeyOrder is put in key order with one entry per key (the later of
// two), put itself when it already is.
func inKeyOrder(put []*legionpb.Item) []*legionpb.Item {
	ordered := true
	for i := 1; i < len(put) && ordered; i++ {
		ordered = put[i-1].GetKey() < put[i].GetKey()
	}
	if ordered {
		return put
	}
	byKey := func(a, b *legionpb.Item) int { return strings.Compare(a.GetKey(), b.GetKey()) }
	put = slices.Clone(put)
	slices.SortStableFunc(put, byKey)
	out := put[:0]
	for i, e := range put {
		if i+1 < len(put) && put[i+1].GetKey() == e.GetKey() {
			continue // the later entry of the key counts
		}
		out = append(out, e)
	}
	return out
}

// applyItems takes a part's changes: reset first when the part comes
// whole, then the keys put (in key order, each once) and those removed.
func applyItems[T any](it *legionpb.Items, what string, decode func([]byte) (T, error), reset func(), setAll func([]string, []T), removeAll func([]string)) error {
	if it == nil {
		return nil
	}
	keys, vals, err := decodeItems(it, what, decode)
	if err != nil {
		return err
	}
	if it.GetReplace() {
		reset()
	}
	setAll(keys, vals)
	removeAll(it.GetRemoved())
	return nil
}

// oneByOne makes per-key put and remove functions applyItems' batches.
func oneByOne[T any](set func(string, T), remove func(string)) (func([]string, []T), func([]string)) {
	return func(keys []string, vals []T) {
			for i, k := range keys {
				set(k, vals[i])
			}
		}, func(keys []string) {
			for _, k := range keys {
				remove(k)
			}
		}
}

// list is the items in key order, nil when there are none. The list is
// shared by every hand-over until the part changes: it is read, never
// written (a change makes a new one).
func (k *keyed[T]) list() []T {
	if len(k.keys) == 0 {
		return nil
	}
	k.shared = true
	return slices.Clip(k.vals)
}

// serviceEndpoints is every service's endpoints, kept apart as each
// service without its tasks and each service's ready tasks by name, as
// managers send them to agents that ask for endpoint tasks; whole
// services (a whole set, or a manager that sends endpoints by service)
// are split the same way. The list handed over is built again only
// after a change, and then reuses the services that did not change: it
// holds each service by pointer, so a hand-over after a task change
// copies a pointer per service and makes the changed services alone
// again.
type serviceEndpoints struct {
	heads *keyed[endpoints.Service]          // by namespace NUL name, Tasks nil
	tasks map[string]*keyed[*endpoints.Task] // by the service's key, then task name
	out   []*endpoints.Service               // the list last handed over; nil when it is to be built whole
	// stale are the services whose tasks changed since out was built:
	// a hand-over after a task change builds only those again.
	stale map[string]bool
}

func newServiceEndpoints() *serviceEndpoints {
	return &serviceEndpoints{heads: newKeyed[endpoints.Service](), tasks: map[string]*keyed[*endpoints.Task]{}, stale: map[string]bool{}}
}

// put takes a service with its tasks: its header and tasks replace what
// was held.
func (e *serviceEndpoints) put(key string, svc endpoints.Service) {
	ts := newKeyed[*endpoints.Task]()
	for _, t := range svc.Tasks {
		ts.set(t.Name, t)
	}
	svc.Tasks = nil
	e.putHead(key, svc)
	if ts.len() == 0 {
		delete(e.tasks, key)
	} else {
		e.tasks[key] = ts
	}
}

func (e *serviceEndpoints) putHead(key string, head endpoints.Service) {
	head.Tasks = nil
	e.heads.set(key, head)
	e.out = nil
}

// remove drops a service and its tasks.
func (e *serviceEndpoints) remove(key string) {
	e.heads.remove(key)
	delete(e.tasks, key)
	e.out = nil
}

// taskKey splits the key of an endpoint task, namespace NUL service NUL
// task, into the service's key and the task's name.
func taskKey(key string) (svc, task string, ok bool) {
	i := strings.LastIndexByte(key, 0)
	if i <= 0 || strings.IndexByte(key[:i], 0) < 0 {
		return "", "", false
	}
	return key[:i], key[i+1:], true
}

// apply takes the changes of a message: whole services (endpoint
// changes) or, from a manager sending them apart, headers and tasks.
func (e *serviceEndpoints) apply(set *legionpb.AssignmentSet) error {
	if it := set.GetEndpointChanges(); it != nil {
		put, remove := oneByOne(e.put, e.remove)
		err := applyItems(it, "endpoints", decodeJSON[endpoints.Service], e.reset, put, remove)
		if err != nil {
			return err
		}
	}
	if it := set.GetEndpointServiceChanges(); it != nil {
		reset := func() {
			// Every service comes again; their tasks stay (the tasks part
			// says what became of them).
			e.heads, e.out = newKeyed[endpoints.Service](), nil
		}
		put, remove := oneByOne(e.putHead, e.remove)
		err := applyItems(it, "endpoints of service", decodeJSON[endpoints.Service], reset, put, remove)
		if err != nil {
			return err
		}
	}
	if it := set.GetEndpointTaskChanges(); it != nil {
		decode := decodeJSON[*endpoints.Task]
		if set.GetTypedValues() {
			decode = taskFromWire
		}
		keys, vals, err := decodeItems(it, "endpoint task", decode)
		if err != nil {
			return err
		}
		if it.GetReplace() {
			e.tasks, e.out = map[string]*keyed[*endpoints.Task]{}, nil
		}
		e.putTasks(keys, vals)
		e.removeTasks(it.GetRemoved())
	}
	return nil
}

// taskFromWire decodes an endpoint task in the wire format, to be held
// by pointer (see endpoints.Service.Tasks).
func taskFromWire(data []byte) (*endpoints.Task, error) {
	t, err := endpoints.TaskFromWire(data)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// kept is the members the endpoint tasks named by keys (namespace NUL
// service NUL task, AssignmentSet.members_kept) stand for, with their
// keys, in key order. A member already held (member) is left as it is:
// a stream resumed on another manager may start a little before the
// point the node's state is at, so the node may have taken the removal,
// and made the member, already. An error names an endpoint task held
// neither way.
func (e *serviceEndpoints) kept(keys []string, member func(key string) bool) ([]string, []*endpoints.Member, error) {
	if len(keys) == 0 {
		return nil, nil, nil
	}
	// Each member's key made once, and the members in one allocation:
	// every node takes every kept member of a rollout.
	type entry struct {
		key string
		m   *endpoints.Member
	}
	made := make([]endpoints.Member, 0, len(keys))
	entries := make([]entry, 0, len(keys))
	for _, k := range keys {
		svc, name, ok := taskKey(k)
		if !ok {
			return nil, nil, fmt.Errorf("member kept %q: not an endpoint task's key", strings.ReplaceAll(k, "\x00", "/"))
		}
		ns, service, _ := strings.Cut(svc, "\x00")
		var t *endpoints.Task
		held := false
		if ts := e.tasks[svc]; ts != nil {
			t, held = ts.get(name)
		}
		if !held || t == nil {
			if member(itemKey(ns, name)) {
				continue
			}
			return nil, nil, fmt.Errorf("member kept %q: no such endpoint task held", strings.ReplaceAll(k, "\x00", "/"))
		}
		made = append(made, endpoints.Member{Namespace: ns, Service: service, Task: name, IP: t.IP, Node: t.Node})
		entries = append(entries, entry{itemKey(ns, name), &made[len(made)-1]})
	}
	// Member keys sort by task within a namespace, not by service first.
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	mkeys, vals := make([]string, len(entries)), make([]*endpoints.Member, len(entries))
	for i, e := range entries {
		mkeys[i], vals[i] = e.key, e.m
	}
	return mkeys, vals, nil
}

// members lists the members the endpoint tasks held stand for, in key
// order (namespace NUL task), with their keys.
func (e *serviceEndpoints) members() ([]string, []*endpoints.Member) {
	type entry struct {
		key string
		m   *endpoints.Member
	}
	var all []entry
	for svc, ts := range e.tasks {
		ns, name, _ := strings.Cut(svc, "\x00")
		for _, t := range ts.vals {
			all = append(all, entry{itemKey(ns, t.Name), &endpoints.Member{Namespace: ns, Service: name, Task: t.Name, IP: t.IP, Node: t.Node}})
		}
	}
	slices.SortFunc(all, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	keys, vals := make([]string, len(all)), make([]*endpoints.Member, len(all))
	for i, k := range all {
		keys[i], vals[i] = k.key, k.m
	}
	return keys, vals
}

// byService calls fn with each run of keys (of endpoint tasks, in order)
// of one service: the service's key, the run's bounds, and the tasks'
// names. Keys that name no task are left out.
func byService(keys []string, fn func(svc string, from, to int, names []string)) {
	var names []string
	for from := 0; from < len(keys); {
		svc, name, ok := taskKey(keys[from])
		if !ok {
			from++
			continue
		}
		names = append(names[:0], name)
		to := from + 1
		for ; to < len(keys); to++ {
			s, n, ok := taskKey(keys[to])
			if !ok || s != svc {
				break
			}
			names = append(names, n)
		}
		fn(svc, from, to, names)
		from = to
	}
}

// putTasks takes endpoint tasks by key, keys in order. A message carries
// a rollout's tasks service by service: each service's run of them goes
// into its list in one pass (keyed.setAll), not one insertion each, which
// moved the tasks after it every time.
func (e *serviceEndpoints) putTasks(keys []string, vals []*endpoints.Task) {
	byService(keys, func(svc string, from, to int, names []string) {
		ts := e.tasks[svc]
		if ts == nil {
			ts = newKeyed[*endpoints.Task]()
			e.tasks[svc] = ts
		}
		ts.setAll(names, vals[from:to])
		e.stale[svc] = true
	})
}

// removeTasks drops endpoint tasks by key, each service's at once.
func (e *serviceEndpoints) removeTasks(keys []string) {
	byService(keys, func(svc string, from, to int, names []string) {
		ts := e.tasks[svc]
		if ts == nil {
			return
		}
		before := ts.len()
		ts.removeAll(names)
		if ts.len() == before {
			return
		}
		if ts.len() == 0 {
			delete(e.tasks, svc)
		}
		e.stale[svc] = true
	})
}

func (e *serviceEndpoints) reset() { *e = *newServiceEndpoints() }

// handOver is every service with its ready tasks, in the whole set's
// order (by key, tasks by name), shared by hand-overs until a change;
// and the services whose ready tasks stand for policy members: the same
// list, with any tasks held without their service's header (a manager
// sends none such) as services of their own.
func (e *serviceEndpoints) handOver() (services, members []*endpoints.Service) {
	if e.heads.len() > 0 {
		switch {
		case e.out == nil:
			out := make([]*endpoints.Service, len(e.heads.vals))
			for i := range e.heads.vals {
				out[i] = e.service(i)
			}
			e.out = out
		case len(e.stale) > 0:
			// The services are as they were: only the stale ones are made
			// again, in a copy of the list (the last one was handed over,
			// with the services in it).
			out := slices.Clone(e.out)
			for svc := range e.stale {
				if i, ok := slices.BinarySearch(e.heads.keys, svc); ok {
					out[i] = e.service(i)
				}
			}
			e.out = out
		}
		services = e.out
	}
	clear(e.stale)
	withTasks := 0
	for _, s := range services {
		if len(s.Tasks) > 0 {
			withTasks++
		}
	}
	if withTasks == len(e.tasks) {
		return services, services
	}
	members = slices.Clip(services)
	for _, key := range slices.Sorted(maps.Keys(e.tasks)) {
		if _, ok := e.heads.get(key); !ok {
			ns, name, _ := strings.Cut(key, "\x00")
			members = append(members, &endpoints.Service{Namespace: ns, Name: name, Tasks: e.tasks[key].list()})
		}
	}
	return services, members
}

// service is the i-th service with its tasks, new.
func (e *serviceEndpoints) service(i int) *endpoints.Service {
	svc := e.heads.vals[i]
	if ts := e.tasks[e.heads.keys[i]]; ts != nil {
		svc.Tasks = ts.list()
	}
	return &svc
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
	endpoints *serviceEndpoints
	peers     *keyed[endpoints.Peer]
	routes    *keyed[endpoints.Route]
	members   *memberSet
	// apart: members holds only the members that are not endpoint tasks,
	// the endpoint tasks standing for the others (a manager sending
	// members beside them); else it holds every member.
	apart bool
	rules endpoints.Policies // isolation and policies only
	// hasPeers and hasPolicies: the whole set carried them (a manager
	// that sends none leaves wg0 and the firewall as they are).
	hasPeers, hasPolicies bool
}

// stateOf is the state a whole set starts.
func stateOf(as agent.Assignments) *state {
	s := &state{tasks: newKeyed[*legion.Task](), values: maps.Clone(as.Values), volumes: newKeyed[*legion.Volume](),
		endpoints: newServiceEndpoints(), peers: newKeyed[endpoints.Peer](), routes: newKeyed[endpoints.Route](),
		members: newMemberSet(), hasPeers: as.Peers != nil, hasPolicies: as.Policies != nil}
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
		s.endpoints.put(itemKey(e.Namespace, e.Name), *e)
	}
	for _, p := range as.Peers {
		s.peers.set(p.Name, p)
	}
	for _, r := range as.Routes {
		s.routes.set(itemKey(r.Namespace, r.Name), r)
	}
	if p := as.Policies; p != nil {
		s.rules = endpoints.Policies{Isolation: p.Isolation, Policies: p.Policies}
		for _, m := range p.Members.Slice() {
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
	if shared := set.GetShared(); len(shared) > 0 {
		// The changes every node is sent alike, encoded once by the
		// manager for all its streams: their fields, merged in.
		if err := (proto.UnmarshalOptions{Merge: true}).Unmarshal(shared, set); err != nil {
			return wrap(fmt.Errorf("shared changes: %w", err))
		}
		set.Shared = nil
	}
	if err := s.tasks.apply(set.GetTaskChanges(), "task", decodeTask); err != nil {
		return wrap(err)
	}
	if it := set.GetValueChanges(); it != nil {
		if it.GetReplace() {
			s.values = map[string][]byte{}
		}
		for _, e := range it.GetPut() {
			s.values[e.GetKey()] = e.GetValue()
		}
		for _, k := range it.GetRemoved() {
			delete(s.values, k)
		}
	}
	if err := s.volumes.apply(set.GetVolumeChanges(), "volume", decodeVolume); err != nil {
		return wrap(err)
	}
	beside := set.GetMembersBesideEndpoints()
	if beside != s.apart {
		s.membersApart(beside)
	}
	// Endpoint tasks this delta removes that stay members: taken before
	// they go.
	keptKeys, kept, err := s.endpoints.kept(set.GetMembersKept(), s.members.has)
	if err != nil {
		return wrap(err)
	}
	if len(kept) > 0 && !beside {
		return wrap(fmt.Errorf("members kept in a delta without members beside the endpoint tasks"))
	}
	if err := s.endpoints.apply(set); err != nil {
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
		if err := jsonfast.Unmarshal(raw, &p); err != nil {
			return wrap(fmt.Errorf("policy rules: %w", err))
		}
		s.rules, s.hasPolicies = endpoints.Policies{Isolation: p.Isolation, Policies: p.Policies}, true
	}
	if set.GetMemberChanges() != nil || beside && set.GetEndpointTaskChanges() != nil {
		s.hasPolicies = true
	}
	if len(kept) > 0 {
		s.hasPolicies = true
	}
	// Apart, these are the changes of the members that are not endpoint
	// tasks (sent whole, they replace those alone): a task becoming ready
	// leaves them in the delta that puts it among the endpoint tasks.
	if err := s.members.apply(set.GetMemberChanges(), set.GetTypedValues()); err != nil {
		return wrap(err)
	}
	s.members.setAll(keptKeys, kept)
	return nil
}

// membersApart makes members hold only the members that are not
// endpoint tasks (apart), or every member: once, when a stream's first
// delta says how its manager sends them.
func (s *state) membersApart(apart bool) {
	keys, vals := s.endpoints.members()
	if apart {
		ours := make(map[string]bool, len(keys))
		for _, k := range keys {
			ours[k] = true
		}
		s.members.drop(ours)
	} else {
		s.members.setAll(keys, vals)
	}
	s.apart = apart
}

// assignments is the state as the agent takes it: what a whole set of
// the same content decodes to.
func (s *state) assignments() agent.Assignments {
	services, memberServices := s.endpoints.handOver()
	as := agent.Assignments{Tasks: nonNil(s.tasks.list()), Values: maps.Clone(s.values), Volumes: s.volumes.list(),
		Endpoints: nonNil(services), Routes: nonNil(s.routes.list())}
	if s.hasPeers {
		as.Peers = nonNil(s.peers.list())
	}
	if s.hasPolicies {
		as.Policies = &endpoints.Policies{Isolation: s.rules.Isolation, Policies: s.rules.Policies, Members: s.members.list()}
		if s.apart {
			as.Policies.Members = as.Policies.Members.WithServices(memberServices)
		}
	}
	return as
}

// decodeTask decodes a task in one pass over its JSON (every node takes
// each change of each of its tasks).
func decodeTask(raw []byte) (*legion.Task, error) {
	o, err := legion.FromJSONAs(legion.KindTask, raw)
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
	err := jsonfast.Unmarshal(raw, &v)
	return v, err
}
