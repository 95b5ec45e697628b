package dispatcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/internal/jsonfast"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/protobuf/proto"
)

// publishEvery is the shortest time between two publications of the
// cache: the events of a busy moment (a rollout writes thousands) are
// folded into one, so the derived parts are worked out once for all of
// them and each stream wakes once. A change after a quiet moment is
// published at once; under load a change waits up to this long. At
// 20 ms the scale run's drain of 32 nodes took 53-62 s and its leader
// spent 4.6 CPU-seconds publishing; at 100 ms (swarmkit's dispatcher
// batches assignments as long) it took 35-39 s with 1.9, and agents
// were sent a third fewer messages, the same bytes.
const publishEvery = 100 * time.Millisecond

// itemKey joins two names with a NUL byte, so keys sort as (first,
// second) pairs do: as the whole set's lists are ordered.
func itemKey(a, b string) string { return a + "\x00" + b }

// epTaskKey is the key of a ready task in the endpoint tasks part:
// namespace NUL service NUL task, so a service's tasks sort together, by
// name, as in its endpoints.
func epTaskKey(svc, task string) string { return svc + "\x00" + task }

// part is one keyed part of what nodes are sent (a node's tasks, the
// services' endpoints, ...): each item's JSON, and a log of which keys
// changed at which generation, so a stream asks what changed since the
// generation it last sent.
type part struct {
	items map[string][]byte
	log   []partChange // in generation order
	base  uint64       // changes at or before base may be gone from log
	// putAt is, where kept (the endpoint tasks), the generation each
	// item was last put at.
	putAt map[string]uint64
}

type partChange struct {
	gen uint64
	key string
}

// maxLogSlack bounds the log beyond the number of items before the older
// half is dropped; a stream behind what is left gets the part whole.
const maxLogSlack = 4096

func newPart() *part { return &part{items: map[string][]byte{}} }

// put sets key's item, reporting whether it changed.
func (p *part) put(gen uint64, key string, data []byte) bool {
	if old, ok := p.items[key]; ok && bytes.Equal(old, data) {
		return false
	}
	p.items[key] = data
	p.note(gen, key)
	if p.putAt != nil {
		p.putAt[key] = gen
	}
	return true
}

// remove drops key's item, reporting whether it was there.
func (p *part) remove(gen uint64, key string) bool {
	if _, ok := p.items[key]; !ok {
		return false
	}
	delete(p.items, key)
	p.note(gen, key)
	if p.putAt != nil {
		delete(p.putAt, key)
	}
	return true
}

func (p *part) note(gen uint64, key string) {
	p.log = append(p.log, partChange{gen, key})
	if n := len(p.log); n > maxLogSlack && n > 4*len(p.items) {
		cut := n / 2
		p.base = p.log[cut-1].gen
		p.log = append([]partChange(nil), p.log[cut:]...)
	}
}

// changed reports whether anything changed after generation since.
func (p *part) changed(since uint64) bool {
	return since < p.base || len(p.log) > 0 && p.log[len(p.log)-1].gen > since
}

// since lists the changes after generation since; whole when the log no
// longer reaches back that far (put then holds every item).
func (p *part) since(since uint64) (put map[string][]byte, removed []string, whole bool) {
	if since < p.base {
		return p.all(), nil, true
	}
	i := sort.Search(len(p.log), func(i int) bool { return p.log[i].gen > since })
	put = map[string][]byte{}
	seen := map[string]bool{}
	for _, c := range p.log[i:] {
		if seen[c.key] {
			continue
		}
		seen[c.key] = true
		if data, ok := p.items[c.key]; ok {
			put[c.key] = data
		} else {
			removed = append(removed, c.key)
		}
	}
	sort.Strings(removed)
	return put, removed, false
}

func (p *part) all() map[string][]byte {
	if p.items == nil {
		return map[string][]byte{}
	}
	return maps.Clone(p.items)
}

// nodeTasks is a node's tasks as its streams are sent them, and what
// those tasks use besides themselves, for the tasks that use anything.
// A rollout changes every node's tasks at every publication and most
// tasks use nothing: with the uses kept as tasks come and go, a stream
// works its node's values and volumes out again (reading each value from
// the store) only when what the node's tasks use changed, not whenever
// one of its tasks did.
type nodeTasks struct {
	*part
	uses    map[string]taskUses // by task key
	usesGen uint64              // the generation of the last change to uses
}

// taskUses is the Secrets, Configs (ValueRefs) and Volumes a task uses,
// all of its namespace.
type taskUses struct {
	namespace string
	values    []ValueRef
	volumes   []string // in order
}

func usesOf(t *legion.Task) taskUses {
	u := taskUses{namespace: t.Metadata.Namespace, values: ValueRefs(t)}
	if len(t.Spec.Volumes) > 0 {
		u.volumes = slices.Sorted(maps.Values(t.Spec.Volumes))
	}
	return u
}

func (u taskUses) none() bool { return len(u.values) == 0 && len(u.volumes) == 0 }

func (u taskUses) equal(v taskUses) bool {
	return u.namespace == v.namespace && slices.Equal(u.values, v.values) && slices.Equal(u.volumes, v.volumes)
}

func newNodeTasks() *nodeTasks { return &nodeTasks{part: newPart(), uses: map[string]taskUses{}} }

// put sets a task's item and what it uses.
func (n *nodeTasks) put(gen uint64, key string, data []byte, u taskUses) {
	n.part.put(gen, key, data)
	old, had := n.uses[key]
	switch {
	case u.none():
		if had {
			delete(n.uses, key)
			n.usesGen = gen
		}
	case !had || !old.equal(u):
		n.uses[key] = u
		n.usesGen = gen
	}
}

// remove drops a task's item and what it used.
func (n *nodeTasks) remove(gen uint64, key string) {
	n.part.remove(gen, key)
	if _, had := n.uses[key]; had {
		delete(n.uses, key)
		n.usesGen = gen
	}
}

// list is the part's items as one JSON list in key order.
func (p *part) list() []byte {
	keys := slices.Sorted(maps.Keys(p.items))
	var b bytes.Buffer
	b.WriteByte('[')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(p.items[k])
	}
	b.WriteByte(']')
	return b.Bytes()
}

// viewCache is one replica's state as every node's stream needs it, kept
// from the replica's events by one goroutine: the objects of the kinds
// the sets are made of, each node's tasks, and the parts every node
// follows (endpoints per service, and apart each service without its
// tasks and each ready task; peers per node, routes, policy rules,
// policy members per task, and apart those that are no endpoint task),
// each worked out again only where an event
// touched it. Streams read it under mu.
type viewCache struct {
	st  *store.Store
	id  uint64 // one per cache made, so what refers to a cache need not keep it
	log *slog.Logger

	mu      sync.Mutex
	err     error         // set once the cache stopped (the store closed)
	changed chan struct{} // closed at the next publication
	gen     uint64        // publications so far
	loads   int           // full readings, for tests
	at      uint64        // the version of the last event taken
	term    uint64        // its term (0 after a reading)
	// loadedAt is the highest version the last reading's lists were at:
	// events up to it may be in that reading's publication unnoted, so
	// no stream resumes from them (see resume.go).
	loadedAt uint64
	marks    []mark // the events taken after it, for streams resuming

	tasks     map[string]*legion.Task // namespace NUL name
	byService map[string]map[string]bool
	services  map[string]*legion.Service
	nodes     map[string]*legion.Node
	routes    map[string]*legion.Route
	nss       map[string]*legion.Namespace
	netpols   map[string]*legion.NetworkPolicy
	volumes   map[string]*legion.Volume

	byNode map[string]*nodeTasks // each node's tasks, as JSON, and what they use
	// endpoints is each service with its ready tasks: whole sets, and the
	// changes of streams that did not ask for endpoint tasks. epHeads and
	// epTasks are the same apart, for those that did: each service
	// without its tasks, and each ready task (epTaskKey), so a change to
	// one task is one item whatever the service's size.
	endpoints, epHeads, epTasks *part
	// epVals is each service's endpoints, its tasks in name order, brought
	// up to each batch's events task by task.
	epVals map[string]endpoints.Service
	// epStale is the services whose item in endpoints is behind epVals:
	// made only when a whole set or a stream without endpoint tasks reads
	// that part (freshEndpoints), since agents ask for endpoint tasks and
	// a rollout changes every service at every publication.
	epStale map[string]bool
	peers   *part
	routesP *part
	members *part
	// lone is the members that are not endpoint tasks (Jobs' tasks,
	// running tasks not ready, tasks of services gone): what the streams
	// that asked for members beside endpoint tasks are sent as members,
	// the node making the rest from the endpoint tasks.
	lone *part
	// kept is, by member key, the lone members that became lone when
	// their endpoint task was removed while the task ran on, the member
	// being that endpoint task's address and node: a stream that asked
	// for members_kept names such a member's endpoint task rather than
	// sending the member, when the node held that endpoint task as it
	// was removed. An entry goes when the member changes again.
	kept map[string]keptMember
	// leftEps is the endpoint tasks the batch being published removed
	// from services still there, by member key (see publishLone).
	leftEps  map[string]leftEp
	rules    []byte
	rulesGen uint64
	// Generations of the last change to Secrets and Configs, Nodes,
	// Volumes and Route objects: what a node's values and volumes depend
	// on beyond its tasks. (A Route's backends follow its service's
	// endpoints, at every publication of a rollout; its certificate, the
	// value a node may be sent, only its object.)
	valuesGen, nodesGen, volumesGen, routesGen uint64
	vols                                       *volumeIndex

	// shared holds, for the current generation, the changes of the parts
	// every node follows since each generation a stream asked from: the
	// streams of a cluster mostly sent their last message at the same
	// generation, so one publication works them out once, not once per
	// node. Its Items are read only once made (marshalled by many streams
	// at once); the endpoints' are made, under mu, in the shape the first
	// stream that needs them asked for.
	shared map[uint64]*sharedChanges
	// sharedBuilt counts the changes worked out, for tests.
	sharedBuilt int

	// What the events of the batch being taken touched: Services (their
	// endpoints worked out again whole; dirtyHeads: only their header,
	// for a Service whose object changed while its endpoints were held,
	// since the object does not decide which tasks are its endpoints and
	// the planner writes a Service's status as its rollout goes), and
	// apart the tasks whose readiness feeds a service's endpoints, by
	// service.
	dirtyServices, dirtyHeads           map[string]bool
	dirtyEpTasks                        map[string]map[string]bool
	dirtyLone                           map[string]bool // member keys
	dirtyPeers, dirtyRoutes, dirtyRules bool
	dirtyVolumes                        bool
	dirtyValues, dirtyNodes, dirtyIDs   bool
	// idsGen is the generation of the last change to what decides whether
	// a node's certificate is still good: its certificate record or the
	// removed nodes (see identitiesSince).
	idsGen uint64
}

// cachesMade numbers the caches made (viewCache.id).
var cachesMade atomic.Uint64

// cacheKinds are the kinds the sets are made of.
var cacheKinds = []legion.Kind{legion.KindTask, legion.KindService, legion.KindNode, legion.KindRoute,
	legion.KindNamespace, legion.KindNetworkPolicy, legion.KindVolume}

// cacheOf is the cache of st, started on first use; a cache whose store
// closed is replaced.
func (s *Service) cacheOf(st *store.Store) *viewCache {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if c := s.cache; c != nil && c.st == st {
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		if err == nil {
			return c
		}
	}
	c := &viewCache{st: st, id: cachesMade.Add(1), log: s.log, changed: make(chan struct{})}
	s.cache = c
	go c.run()
	return c
}

// run follows the replica until it closes: a full reading, then events;
// a history that no longer reaches back (compacted, or a snapshot
// installed) means reading again.
func (c *viewCache) run() {
	var behind error // why the cache reads again; nil at the first reading
	for {
		start := time.Now()
		c.mu.Lock()
		from := c.at
		c.mu.Unlock()
		w, err := c.load()
		if err == nil {
			if behind != nil {
				c.readAgain(behind, from, time.Since(start))
			}
			err = c.follow(w)
		}
		if errors.Is(err, store.ErrCompacted) || errors.Is(err, store.ErrReset) {
			behind = err
			continue
		}
		c.mu.Lock()
		c.err = err
		close(c.changed)
		c.mu.Unlock()
		return
	}
}

// What a cache logs when it read the replica again (readAgain).
const (
	readAgainBehind   = "assignment cache read the replica again: its watch fell behind the store's history (more changes came than the history holds while it was busy)"
	readAgainSnapshot = "assignment cache read the replica again: a snapshot was installed"
)

// readAgain says the cache read the replica again (why: the watch fell
// behind the store's history, or a snapshot was installed) from version
// from to where it is now: every stream's next message then carries what
// that reading found changed, a burst on a busy manager worth knowing of.
func (c *viewCache) readAgain(why error, from uint64, took time.Duration) {
	c.mu.Lock()
	to := c.at
	c.mu.Unlock()
	msg, level := readAgainBehind, slog.LevelWarn
	if errors.Is(why, store.ErrReset) {
		msg, level = readAgainSnapshot, slog.LevelInfo
	}
	c.log.Log(context.Background(), level, msg, "from", from, "to", to, "took", took.Round(time.Millisecond))
}

// load reads every object the cache holds and publishes them, returning
// a watch from the reading's version.
func (c *viewCache) load() (*store.Watcher, error) {
	at, err := c.st.Version()
	if err != nil {
		return nil, err
	}
	w, err := c.st.Watch(store.AfterRead(at))
	if err != nil {
		return nil, err
	}
	objs := map[legion.Kind][]legion.Object{}
	listed := at
	for _, k := range cacheKinds {
		var v uint64
		if objs[k], v, err = c.st.List(k, "", nil); err != nil {
			return nil, err
		}
		listed = max(listed, v)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at, c.term, c.loadedAt = at, 0, listed
	c.loads++
	// A reading after the first (the watch fell behind the store's
	// history under load, or a snapshot was installed) keeps the parts
	// and works out what differs from them, so the streams go on with
	// changes: starting every stream again with a whole set cost a
	// 20,000-task cluster about 5 MB per node at the worst moment.
	again := c.endpoints != nil
	if !again {
		c.makeParts()
	}
	c.forget()
	for _, k := range cacheKinds {
		for _, o := range objs[k] {
			c.take(store.Event{Type: store.Added, Object: o})
		}
	}
	for k := range c.services {
		c.dirtyServices[k] = true
	}
	if again {
		c.dropMissing()
	}
	c.publish()
	return w, nil
}

// makeParts makes the cache's parts, empty, at its first reading: later
// readings keep them, to send streams what changed.
func (c *viewCache) makeParts() {
	c.byNode = map[string]*nodeTasks{}
	c.endpoints, c.epVals, c.peers, c.routesP, c.members = newPart(), map[string]endpoints.Service{}, newPart(), newPart(), newPart()
	c.epStale = map[string]bool{}
	c.epHeads, c.epTasks, c.lone = newPart(), newPart(), newPart()
	c.epTasks.putAt = map[string]uint64{}
	c.kept, c.leftEps = map[string]keptMember{}, map[string]leftEp{}
}

// forget empties the objects for a reading to fill, marking every
// derived part as touched.
func (c *viewCache) forget() {
	c.tasks, c.byService = map[string]*legion.Task{}, map[string]map[string]bool{}
	c.services, c.nodes, c.routes = map[string]*legion.Service{}, map[string]*legion.Node{}, map[string]*legion.Route{}
	c.nss, c.netpols, c.volumes = map[string]*legion.Namespace{}, map[string]*legion.NetworkPolicy{}, map[string]*legion.Volume{}
	c.dirtyServices, c.dirtyEpTasks, c.dirtyLone = map[string]bool{}, map[string]map[string]bool{}, map[string]bool{}
	c.dirtyHeads = map[string]bool{}
	for k := range c.lone.items { // those of tasks gone since are looked at again
		c.dirtyLone[k] = true
	}
	c.dirtyPeers, c.dirtyRoutes, c.dirtyRules, c.dirtyVolumes = true, true, true, true
	c.dirtyValues, c.dirtyNodes, c.dirtyIDs = true, true, true
}

// dropMissing removes from the kept parts what a new reading no longer
// holds: tasks gone or moved to another node, members no longer running,
// the endpoints of services gone (publish removes those marked dirty).
// Called by load with mu held, before publish.
func (c *viewCache) dropMissing() {
	gen := c.gen + 1
	for node, p := range c.byNode {
		for key := range p.items {
			if t := c.tasks[key]; t == nil || t.Spec.Node != node {
				p.remove(gen, key)
			}
		}
	}
	for key := range c.members.items {
		if t := c.tasks[key]; t == nil || !endpoints.Running(t) {
			c.members.remove(gen, key)
		}
	}
	for sk := range c.epVals {
		c.dirtyServices[sk] = true
	}
}

// follow takes events until the watch fails, publishing the events of
// each busy moment together.
func (c *viewCache) follow(w *store.Watcher) error {
	ctx := context.Background()
	drained, cancel := context.WithCancel(ctx)
	cancel() // Next hands over what the history holds, then stops
	last := time.Time{}
	for {
		ev, err := w.Next(ctx)
		if err != nil {
			return err
		}
		if wait := publishEvery - time.Since(last); wait > 0 {
			time.Sleep(wait) // let the rest of the moment's events arrive
		}
		c.mu.Lock()
		c.take(ev)
		for {
			ev, err := w.Next(drained)
			if errors.Is(err, context.Canceled) {
				break
			}
			if err != nil {
				c.mu.Unlock()
				return err
			}
			c.take(ev)
		}
		c.publish()
		c.mu.Unlock()
		last = time.Now()
	}
}

// take applies one event to the objects, noting what it touches. Called
// with mu held, gen not yet advanced for the batch.
func (c *viewCache) take(ev store.Event) {
	gen := c.gen + 1
	if ev.Version > c.at {
		c.at, c.term = ev.Version, ev.Term
	}
	if ev.Version > c.loadedAt {
		c.noteMark(ev.Version, ev.Term, gen)
	}
	o := ev.Object
	md := o.GetMetadata()
	key := itemKey(md.Namespace, md.Name)
	gone := ev.Type == store.Deleted
	switch x := o.(type) {
	case *legion.Task:
		c.dirtyLone[key] = true
		old := c.tasks[key]
		if old != nil {
			c.touchTask(old)
			if old.Spec.Node != x.Spec.Node || gone {
				if p := c.byNode[old.Spec.Node]; p != nil {
					p.remove(gen, key)
				}
			}
			// A task gone, or one of this name now another's (deleted and
			// made again within the batch), leaves its service's tasks.
			if old.Spec.Owner.Kind == legion.KindService && (gone || x.Spec.Owner != old.Spec.Owner) {
				delete(c.byService[itemKey(md.Namespace, old.Spec.Owner.Name)], key)
			}
		}
		if gone {
			delete(c.tasks, key)
			c.members.remove(gen, key)
			return
		}
		c.tasks[key] = x
		c.touchTask(x)
		if x.Spec.Owner.Kind == legion.KindService {
			sk := itemKey(md.Namespace, x.Spec.Owner.Name)
			if c.byService[sk] == nil {
				c.byService[sk] = map[string]bool{}
			}
			c.byService[sk][key] = true
		}
		if x.Spec.Node != "" {
			data := ev.StoredJSON()
			var err error
			if data == nil { // an event this replica did not apply (a reading)
				data, err = legion.MarshalJSON(x)
			}
			if err == nil {
				p := c.byNode[x.Spec.Node]
				if p == nil {
					p = newNodeTasks()
					c.byNode[x.Spec.Node] = p
				}
				p.put(gen, key, data, usesOf(x))
			}
		}
		if endpoints.Running(x) {
			m := endpoints.Member{Namespace: md.Namespace, Task: md.Name, IP: x.Status.IP, Node: x.Spec.Node}
			if x.Spec.Owner.Kind == legion.KindService {
				m.Service = x.Spec.Owner.Name
			}
			if data, err := json.Marshal(m); err == nil {
				c.members.put(gen, key, data)
			}
		} else {
			c.members.remove(gen, key)
		}
	case *legion.Service:
		setOrDelete(c.services, key, x, gone)
		if _, held := c.epVals[key]; held && !gone {
			c.dirtyHeads[key] = true
		} else {
			c.dirtyServices[key] = true
		}
	case *legion.Node:
		// A node turning suspect takes its tasks out of the endpoints;
		// heard from again, it puts them back.
		if old := c.nodes[md.Name]; endpoints.NodeServes(old) != endpoints.NodeServes(x) || gone {
			c.touchNodeTasks(md.Name)
		}
		setOrDelete(c.nodes, md.Name, x, gone)
		c.dirtyPeers, c.dirtyNodes = true, true
	case *legion.Route:
		setOrDelete(c.routes, key, x, gone)
		c.dirtyRoutes = true
	case *legion.Namespace:
		setOrDelete(c.nss, md.Name, x, gone)
		c.dirtyRules = true
	case *legion.NetworkPolicy:
		setOrDelete(c.netpols, key, x, gone)
		c.dirtyRules = true
	case *legion.Volume:
		setOrDelete(c.volumes, key, x, gone)
		c.dirtyVolumes = true
	case *legion.Secret:
		c.dirtyValues = true
	case *legion.Config:
		c.dirtyValues = true
		if md.Namespace == legion.SystemNamespace &&
			(md.Name == pki.RemovedNodesConfig || strings.HasPrefix(md.Name, pki.NodeCertsPrefix)) {
			c.dirtyIDs = true
		}
	}
}

// touchNodeTasks marks the services whose ready tasks run on node as
// changed.
func (c *viewCache) touchNodeTasks(node string) {
	if p := c.byNode[node]; p != nil {
		for key := range p.items {
			if t := c.tasks[key]; t != nil {
				c.touchTask(t)
			}
		}
	}
}

// touchTask marks a task whose readiness feeds its service's endpoints
// as changed. A task leaving readiness is seen through its old version,
// which was ready; one entering it through its new one.
func (c *viewCache) touchTask(t *legion.Task) {
	if !endpoints.Ready(t) {
		return
	}
	sk := itemKey(t.Metadata.Namespace, t.Spec.Owner.Name)
	keys := c.dirtyEpTasks[sk]
	if keys == nil {
		keys = map[string]bool{}
		c.dirtyEpTasks[sk] = keys
	}
	keys[itemKey(t.Metadata.Namespace, t.Metadata.Name)] = true
}

func setOrDelete[T any](m map[string]T, key string, v T, gone bool) {
	if gone {
		delete(m, key)
		return
	}
	m[key] = v
}

// identitiesSince reports whether a node's certificate record or the
// removed nodes changed after generation gen, with the generation
// published now. Other Configs (audit batches are written every second
// under load) do not count.
func (c *viewCache) identitiesSince(gen uint64) (bool, uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idsGen > gen, c.gen
}

// hasNode reports whether the cache, once loaded, holds node; false
// when it does not know (not loaded yet), for the caller to ask the
// replica.
func (c *viewCache) hasNode(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen > 0 && c.nodes[node] != nil
}

// publish works out again what the batch's events touched and wakes the
// streams. Called with mu held.
func (c *viewCache) publish() {
	c.gen++
	gen := c.gen
	epChanged := map[string]bool{} // services whose endpoints changed
	for sk := range c.dirtyServices {
		if c.publishService(gen, sk) {
			epChanged[sk] = true
		}
		delete(c.dirtyEpTasks, sk)
	}
	for sk := range c.dirtyHeads {
		if !c.dirtyServices[sk] && c.publishHead(gen, sk) {
			epChanged[sk] = true
		}
	}
	clear(c.dirtyHeads)
	for sk, keys := range c.dirtyEpTasks {
		if c.publishEndpointTasks(gen, sk, keys) {
			epChanged[sk] = true
		}
	}
	clear(c.dirtyServices)
	clear(c.dirtyEpTasks)
	c.publishLone(gen)
	if c.dirtyPeers {
		nodes := sortedValues(c.nodes)
		seen := map[string]bool{}
		for _, p := range endpoints.Peers(nodes) {
			if data, err := json.Marshal(p); err == nil {
				c.peers.put(gen, p.Name, data)
				seen[p.Name] = true
			}
		}
		for k := range c.peers.items {
			if !seen[k] {
				c.peers.remove(gen, k)
			}
		}
	}
	switch {
	case c.dirtyRoutes:
		c.publishRoutes(gen, sortedValues(c.routes), true)
	case len(epChanged) > 0 && len(c.routes) > 0:
		// Only the routes of the services whose endpoints changed: in a
		// rollout that is a few services a publication, of hundreds.
		var rs []*legion.Route
		for _, r := range c.routes {
			if epChanged[itemKey(r.Metadata.Namespace, r.Spec.Service)] {
				rs = append(rs, r)
			}
		}
		c.publishRoutes(gen, rs, false)
	}
	if c.dirtyRules {
		p := endpoints.ComputePolicies(sortedValues(c.nss), sortedValues(c.netpols), nil)
		if data, err := json.Marshal(p); err == nil && !bytes.Equal(data, c.rules) {
			c.rules, c.rulesGen = data, gen
		}
	}
	if c.dirtyVolumes {
		c.vols = indexVolumes(sortedValues(c.volumes), c.at)
		c.volumesGen = gen
	}
	if c.dirtyValues {
		c.valuesGen = gen
	}
	if c.dirtyRoutes {
		c.routesGen = gen
	}
	if c.dirtyNodes {
		c.nodesGen = gen
	}
	if c.dirtyIDs {
		c.idsGen = gen
	}
	c.dirtyPeers, c.dirtyRoutes, c.dirtyRules, c.dirtyVolumes = false, false, false, false
	c.dirtyValues, c.dirtyNodes, c.dirtyIDs = false, false, false
	clear(c.shared) // worked out up to the generation before
	close(c.changed)
	c.changed = make(chan struct{})
}

// publishRoutes works out routes again against their services'
// endpoints; all says they are every route, and the others are removed.
func (c *viewCache) publishRoutes(gen uint64, routes []*legion.Route, all bool) {
	var eps []endpoints.Service
	for _, r := range routes {
		if e, ok := c.epVals[itemKey(r.Metadata.Namespace, r.Spec.Service)]; ok {
			eps = append(eps, e)
		}
	}
	seen := map[string]bool{}
	for _, r := range endpoints.ComputeRoutes(routes, eps) {
		k := itemKey(r.Namespace, r.Name)
		if data, err := json.Marshal(r); err == nil {
			c.routesP.put(gen, k, data)
			seen[k] = true
		}
	}
	if all {
		for k := range c.routesP.items {
			if !seen[k] {
				c.routesP.remove(gen, k)
			}
		}
	}
}

// publishService works out service sk's endpoints again from all its
// tasks, after the Service changed (or was read again), reporting
// whether they changed.
func (c *viewCache) publishService(gen uint64, sk string) bool {
	svc := c.services[sk]
	old, had := c.epVals[sk]
	if svc == nil {
		if !had {
			return false
		}
		delete(c.epVals, sk)
		delete(c.epStale, sk)
		c.endpoints.remove(gen, sk)
		c.epHeads.remove(gen, sk)
		for _, t := range old.Tasks {
			c.epTasks.remove(gen, epTaskKey(sk, t.Name))
			c.dirtyLone[memberKeyOf(sk, t.Name)] = true
		}
		return true
	}
	e := endpoints.Head(svc)
	hdata, err := json.Marshal(e)
	if err != nil {
		return false
	}
	for tk := range c.byService[sk] {
		if t := c.tasks[tk]; t != nil && c.inEndpoints(sk, t) {
			e.Tasks = append(e.Tasks, endpoints.TaskOf(t))
		}
	}
	slices.SortFunc(e.Tasks, func(a, b *endpoints.Task) int { return strings.Compare(a.Name, b.Name) })
	c.epVals[sk] = e
	headChanged := c.epHeads.put(gen, sk, hdata)
	tasksChanged := c.putEndpointTasks(gen, sk, old.Tasks, e.Tasks)
	if !had || headChanged || tasksChanged {
		c.epStale[sk] = true
		return true
	}
	return false
}

// publishHead works service sk's endpoints' header out again from its
// object, keeping its tasks; it reports whether the header changed.
func (c *viewCache) publishHead(gen uint64, sk string) bool {
	e, had := c.epVals[sk]
	svc := c.services[sk]
	if !had || svc == nil {
		return c.publishService(gen, sk)
	}
	head := endpoints.Head(svc)
	hdata, err := json.Marshal(head)
	if err != nil {
		return false
	}
	head.Tasks = e.Tasks
	c.epVals[sk] = head
	if !c.epHeads.put(gen, sk, hdata) {
		return false
	}
	c.epStale[sk] = true
	return true
}

// inEndpoints reports whether task t is one of service sk's endpoints:
// its task (a task of that name may be another's since), ready, on a
// node that serves.
func (c *viewCache) inEndpoints(sk string, t *legion.Task) bool {
	ns, name, _ := strings.Cut(sk, "\x00")
	return t.Metadata.Namespace == ns && t.Spec.Owner.Name == name &&
		endpoints.Ready(t) && endpoints.NodeServes(c.nodes[t.Spec.Node])
}

// publishEndpointTasks brings service sk's endpoints up to the tasks
// keys (namespace NUL name) a batch touched, each put, replaced or
// removed by itself: a rollout's batch costs what it changed, not the
// service's size. It reports whether the endpoints changed.
func (c *viewCache) publishEndpointTasks(gen uint64, sk string, keys map[string]bool) bool {
	e, had := c.epVals[sk]
	if !had {
		if c.services[sk] == nil {
			return false // no service, no endpoints: its tasks wait for it
		}
		return c.publishService(gen, sk)
	}
	changed := false
	for tk := range keys {
		_, name, _ := strings.Cut(tk, "\x00")
		var now *endpoints.Task
		if t := c.tasks[tk]; t != nil && c.inEndpoints(sk, t) {
			now = endpoints.TaskOf(t)
		}
		i, found := slices.BinarySearchFunc(e.Tasks, name, func(t *endpoints.Task, name string) int { return strings.Compare(t.Name, name) })
		k := epTaskKey(sk, name)
		switch {
		case now == nil && !found:
			continue
		case now == nil:
			c.removeEndpointTask(gen, sk, e.Tasks[i])
			e.Tasks = slices.Delete(e.Tasks, i, i+1)
		case found && *e.Tasks[i] == *now:
			if _, ok := c.epTasks.items[k]; ok {
				continue
			}
			fallthrough
		default:
			if !c.putEndpointTask(gen, sk, now) {
				continue
			}
			if found {
				e.Tasks[i] = now
			} else {
				e.Tasks = slices.Insert(e.Tasks, i, now)
			}
		}
		changed = true
	}
	if changed {
		c.epVals[sk] = e
		c.epStale[sk] = true
	}
	return changed
}

// freshEndpoints brings the endpoints part up to epVals, for a reader of
// it. Made at the current generation: every reader of the part calls
// this first, so none has read the part since these services changed.
// Called with mu held.
func (c *viewCache) freshEndpoints() {
	for sk := range c.epStale {
		if data, err := json.Marshal(c.epVals[sk]); err == nil {
			c.endpoints.put(c.gen, sk, data)
		}
	}
	clear(c.epStale)
}

// putEndpointTasks brings the endpoint tasks of service sk from was to
// now (both in name order, as Compute gives them): a task whose endpoint
// did not change is not touched, so one task becoming ready, or not, or
// moving is one change whatever the service's size.
func (c *viewCache) putEndpointTasks(gen uint64, sk string, was, now []*endpoints.Task) bool {
	changed := false
	i := 0
	for _, t := range now {
		for i < len(was) && was[i].Name < t.Name {
			c.removeEndpointTask(gen, sk, was[i])
			changed = true
			i++
		}
		k := epTaskKey(sk, t.Name)
		if i < len(was) && was[i].Name == t.Name {
			same := *was[i] == *t
			i++
			if _, ok := c.epTasks.items[k]; same && ok {
				continue
			}
		}
		if c.putEndpointTask(gen, sk, t) {
			changed = true
		}
	}
	for ; i < len(was); i++ {
		c.removeEndpointTask(gen, sk, was[i])
		changed = true
	}
	return changed
}

// putEndpointTask puts task t in the endpoint tasks of service sk,
// reporting whether it could be encoded.
func (c *viewCache) putEndpointTask(gen uint64, sk string, t *endpoints.Task) bool {
	data, err := json.Marshal(t)
	if err != nil {
		return false
	}
	c.epTasks.put(gen, epTaskKey(sk, t.Name), data)
	c.dirtyLone[memberKeyOf(sk, t.Name)] = true
	return true
}

// removeEndpointTask removes task t from the endpoint tasks of service
// sk, still there, noting it for publishLone.
func (c *viewCache) removeEndpointTask(gen uint64, sk string, t *endpoints.Task) {
	k, mk := epTaskKey(sk, t.Name), memberKeyOf(sk, t.Name)
	putAt := c.epTasks.putAt[k]
	if c.epTasks.remove(gen, k) {
		c.leftEps[mk] = leftEp{key: k, task: t, putAt: putAt}
	}
	c.dirtyLone[mk] = true
}

// keptMember is a lone member that was an endpoint task until removedAt
// (see viewCache.kept).
type keptMember struct {
	epKey     string // its endpoint task's key
	putAt     uint64 // when that endpoint task was last put
	removedAt uint64 // when it was removed, and the member put
}

// leftEp is an endpoint task removed by a publication: its key, its
// value and when it was last put.
type leftEp struct {
	key   string
	task  *endpoints.Task
	putAt uint64
}

// memberKeyOf is the member key (namespace NUL task) of task of service
// sk (namespace NUL name).
func memberKeyOf(sk, task string) string {
	ns, _, _ := strings.Cut(sk, "\x00")
	return itemKey(ns, task)
}

// publishLone brings lone up to the members and endpoint tasks the batch
// touched: a member is lone unless its task is an endpoint task now.
//
// A member made lone by its endpoint task's removal in this batch, with
// that task's address and node, is noted as kept (see viewCache.kept);
// any other change to a lone member ends its note.
func (c *viewCache) publishLone(gen uint64) {
	for k := range c.dirtyLone {
		data, ok := c.members.items[k]
		if ok {
			if t := c.tasks[k]; t != nil && t.Spec.Owner.Kind == legion.KindService {
				_, isEp := c.epTasks.items[epTaskKey(itemKey(t.Metadata.Namespace, t.Spec.Owner.Name), t.Metadata.Name)]
				ok = !isEp
			}
		}
		if ok {
			if c.lone.put(gen, k, data) {
				left, was := c.leftEps[k]
				if was && left.madeOf(data) {
					c.kept[k] = keptMember{epKey: left.key, putAt: left.putAt, removedAt: gen}
				} else {
					delete(c.kept, k)
				}
			}
		} else if c.lone.remove(gen, k) {
			delete(c.kept, k)
		}
	}
	clear(c.dirtyLone)
	clear(c.leftEps)
}

// madeOf reports whether member (its JSON) is what a node makes of the
// endpoint task: the same task, address and node.
func (l leftEp) madeOf(member []byte) bool {
	var m endpoints.Member
	if err := jsonfast.Unmarshal(member, &m); err != nil {
		return false
	}
	return m.Task == l.task.Name && m.IP == l.task.IP && m.Node == l.task.Node &&
		l.key == epTaskKey(itemKey(m.Namespace, m.Service), m.Task)
}

// sharedChanges is what changed in the parts every node follows. The
// endpoints are worked out in the shape the streams asked for: whole
// services, or services and tasks apart; the members all of them, or
// those beside the endpoint tasks (lone); and the members and endpoint
// tasks, for the streams that asked for typed values, with their values
// in the wire format (typedMembers, typedLone, typedEpTasks).
type sharedChanges struct {
	endpoints, epHeads, epTasks, peers, routes, members, lone lazyItems
	typedMembers, typedLone, typedEpTasks                     lazyItems
	// keptLone is lone without the members named by endpoint task in
	// kept, for the streams that asked for members_kept.
	keptLone, typedKeptLone lazyItems
	kept                    []string
	// wire is the changes encoded for the streams that take them so
	// (AssignmentsRequest.shared_changes), by shape (shape.index);
	// encoded marks those worked out.
	wire    [16][]byte
	encoded [16]bool
}

// lazyItems is a part's changes as sent, worked out when first asked.
type lazyItems struct {
	it   *legionpb.Items
	made bool
}

// get is the changes, worked out by make the first time.
func (l *lazyItems) get(make func() *legionpb.Items) *legionpb.Items {
	if !l.made {
		l.it, l.made = make(), true
	}
	return l.it
}

// shape is how a stream takes the changes every node is sent alike.
type shape struct {
	apart bool // endpoints as services and tasks apart (endpoint_tasks)
	typed bool // member and endpoint task values in the wire format
	lone  bool // members beside the endpoint tasks (with apart)
	kept  bool // members_kept (with lone)
}

// index is where sharedChanges keeps the encoding of the shape.
func (sh shape) index() int {
	i := 0
	if sh.apart {
		i++
	}
	if sh.typed {
		i += 2
	}
	if sh.lone {
		i += 4
	}
	if sh.kept {
		i += 8
	}
	return i
}

// encode is the changes in the wire format of an AssignmentSet holding
// only them (nil when there are none), encoded once for every stream
// that asks for it. Called with the cache's mu held.
func (c *viewCache) encode(sc *sharedChanges, since uint64, sh shape) ([]byte, error) {
	i := sh.index()
	if !sc.encoded[i] {
		m := &legionpb.AssignmentSet{}
		c.fill(m, sc, since, sh)
		data, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		if len(data) == 0 {
			data = nil
		}
		sc.wire[i], sc.encoded[i] = data, true
	}
	return sc.wire[i], nil
}

// fill puts the changes after generation since in set's fields, in the
// shape asked for, working out what no stream asked for before. Called
// with the cache's mu held.
func (c *viewCache) fill(set *legionpb.AssignmentSet, sc *sharedChanges, since uint64, sh shape) {
	items := func(p *part) func() *legionpb.Items {
		return func() *legionpb.Items { return itemsOf(p.since(since)) }
	}
	set.PeerChanges = sc.peers.get(items(c.peers))
	set.RouteChanges = sc.routes.get(items(c.routesP))
	if !sh.apart {
		c.freshEndpoints()
		set.EndpointChanges = sc.endpoints.get(items(c.endpoints))
	} else {
		set.EndpointServiceChanges = sc.epHeads.get(items(c.epHeads))
		epTasks := sc.epTasks.get(items(c.epTasks))
		if sh.typed {
			epTasks = sc.typedEpTasks.get(func() *legionpb.Items { return typedItems(epTasks, endpoints.TaskWire) })
		}
		set.EndpointTaskChanges = epTasks
	}
	members, typed := &sc.members, &sc.typedMembers
	made := items(c.members)
	switch {
	case sh.apart && sh.lone && sh.kept:
		members, typed = &sc.keptLone, &sc.typedKeptLone
		made = func() *legionpb.Items {
			var it *legionpb.Items
			it, sc.kept = c.keptSince(since)
			return it
		}
	case sh.apart && sh.lone:
		members, typed, made = &sc.lone, &sc.typedLone, items(c.lone)
	}
	m := members.get(made)
	if sh.typed {
		m = typed.get(func() *legionpb.Items { return typedItems(m, endpoints.MemberWire) })
	}
	set.MemberChanges = m
	if sh.apart && sh.lone && sh.kept {
		set.MembersKept = sc.kept
	}
}

// keptSince is the changes of the lone members after generation since,
// less those a node that was sent that generation makes itself from the
// endpoint tasks it held (kept), named by endpoint task instead.
func (c *viewCache) keptSince(since uint64) (*legionpb.Items, []string) {
	put, removed, whole := c.lone.since(since)
	var kept []string
	if !whole {
		for k := range put {
			if m, ok := c.kept[k]; ok && m.putAt <= since && since < m.removedAt {
				kept = append(kept, m.epKey)
				delete(put, k)
			}
		}
		slices.Sort(kept)
	}
	return itemsOf(put, removed, whole), kept
}

// typedItems is it with each JSON value decoded and encoded again in the
// wire format: once per generation on the manager, for every node. A
// value that does not decode (never one the cache made) is left out.
func typedItems[T any](it *legionpb.Items, encode func(T) []byte) *legionpb.Items {
	if it == nil {
		return nil
	}
	out := &legionpb.Items{Removed: it.Removed, Replace: it.Replace, Put: make([]*legionpb.Item, 0, len(it.Put))}
	for _, e := range it.Put {
		var v T
		if err := jsonfast.Unmarshal(e.Value, &v); err != nil {
			continue
		}
		out.Put = append(out.Put, &legionpb.Item{Key: e.Key, Value: encode(v)})
	}
	return out
}

// sharedSince is the changes of the shared parts after generation since,
// up to the current one, worked out as streams ask for them (fill).
// Called with mu held.
func (c *viewCache) sharedSince(since uint64) *sharedChanges {
	sc, ok := c.shared[since]
	if !ok {
		sc = &sharedChanges{}
		if c.shared == nil {
			c.shared = map[uint64]*sharedChanges{}
		}
		c.shared[since] = sc
		c.sharedBuilt++
	}
	return sc
}

// sortedValues lists a map's values in key order.
func sortedValues[T any](m map[string]T) []T {
	keys := slices.Sorted(maps.Keys(m))
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// sync waits until the cache has taken every event the replica's history
// holds now, so a stream opened after a write sees it.
func (c *viewCache) sync(ctx context.Context) error {
	drained, cancel := context.WithCancel(ctx)
	cancel()
	for {
		c.mu.Lock()
		at, ch, err, loaded := c.at, c.changed, c.err, c.gen > 0
		c.mu.Unlock()
		if err != nil {
			return err
		}
		w, err := c.st.Watch(store.AfterRead(at))
		if err == nil && loaded {
			if _, err = w.Next(drained); errors.Is(err, context.Canceled) && ctx.Err() == nil {
				return nil
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
