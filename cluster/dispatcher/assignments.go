package dispatcher

import (
	"bytes"
	"context"
	"encoding/pem"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Assignments streams the caller's node its tasks and the Secret and
// Config values they use, from this manager's replica: a whole set at
// once, then, after every change that touches the node's set, either a
// new whole set or (when the request asks for deltas) only what changed
// since the message before. A request for deltas that says where the
// node's state is (resume_version and resume_term, from an earlier
// stream of any manager) starts with what changed since, when this
// manager's cache can tell (resume.go), instead of a whole set. Every
// stream reads the replica through one cache kept from its events
// (viewCache), so a change costs the work of that change, not a reading
// of the cluster per node.
func (s *Service) Assignments(req *legionpb.AssignmentsRequest, stream grpc.ServerStreamingServer[legionpb.AssignmentSet]) error {
	ctx := stream.Context()
	id, leaf, err := caller(ctx, req.GetNode())
	if err != nil {
		return err
	}
	st, err := s.replica()
	if err != nil {
		return err
	}
	if err := s.following(ctx, st, true); err != nil {
		return err
	}
	if err := s.holds(ctx, st, id, leaf, false); err != nil {
		return err
	}
	c := s.cacheOf(st)
	if err := c.sync(ctx); err != nil {
		return s.endOf(ctx, err)
	}
	ss := &streamState{node: id.Name, sharedWire: req.GetSharedChanges(), shape: shape{apart: req.GetEndpointTasks(),
		typed: req.GetTypedValues(), lone: req.GetEndpointTasks() && req.GetMembersBesideEndpoints(),
		kept: req.GetEndpointTasks() && req.GetMembersBesideEndpoints() && req.GetMembersKept()}}
	if req.GetDeltas() {
		// The node's state came from a stream before this one (of this
		// manager or another): where the cache can tell what changed since,
		// the stream starts with that.
		if gen, ok := c.resumeGen(ctx, req.GetResumeVersion(), req.GetResumeTerm()); ok {
			ss.sent, ss.gen, ss.resumed = true, gen, true
		}
	}
	var last *legionpb.AssignmentSet
	// checked is the cache generation the node's removal was last read at
	// (0: not since holds): it is read again only after a certificate
	// record or the removed nodes changed, not at every publication (a
	// Get and a decoding of two records per node, many times a second in
	// a rollout).
	checked := uint64(0)
	for {
		whole := !req.GetDeltas() || !ss.sent
		set, ch, err := s.compose(st, c, ss, whole)
		if err != nil {
			return s.statusOf(err)
		}
		if set != nil && whole {
			// A whole set that did not change is not sent again.
			at, term := set.Version, set.Term
			set.Version, set.Term = 0, 0
			if last != nil && proto.Equal(set, last) {
				set = nil
			} else {
				last = proto.Clone(set).(*legionpb.AssignmentSet)
				set.Version, set.Term = at, term
			}
		}
		if set != nil {
			if err := stream.Send(set); err != nil {
				return err
			}
			ss.sent = true
		}
		if err := s.waitChange(ctx, st, ch); err != nil {
			return s.endOf(ctx, err)
		}
		// The removal of the node is a Config change, which wakes the
		// wait: the stream ends with the refusal at once.
		if changed, at := c.identitiesSince(checked); changed {
			if err := Revoked(st, leaf); err != nil {
				return err
			}
			checked = at
		}
	}
}

// endOf is the status a stream ends with.
func (s *Service) endOf(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return status.FromContextError(ctx.Err()).Err()
	}
	return s.statusOf(err)
}

// waitChange returns once the cache published again (ch closed), or with
// an error once the replica no longer follows a leader.
func (s *Service) waitChange(ctx context.Context, st *store.Store, ch <-chan struct{}) error {
	t := time.NewTimer(s.check)
	defer t.Stop()
	for {
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := s.following(ctx, st, false); err != nil {
			return err
		}
		t.Reset(s.check)
	}
}

// streamState is what one stream has sent: the cache generation its last
// message was made at, and the node's values and volumes as sent.
type streamState struct {
	node string
	// shape: how the stream takes the changes every node is sent alike,
	// as it asked: endpoints as changes per task (endpoint_tasks), member
	// and endpoint task values in the wire format (typed_values), members
	// beside the endpoint tasks (members_beside_endpoints).
	shape shape
	// sharedWire: the stream takes the changes every node is sent alike
	// encoded once for all streams (AssignmentSet.shared).
	sharedWire bool
	sent       bool
	// resumed: the stream goes on from the state of another stream, whose
	// values and volumes it does not know; its first message sends them
	// whole.
	resumed bool
	gen     uint64
	values  map[string][]byte
	volumes map[string][]byte
}

// compose makes the stream's next message from the cache: a whole set,
// or the changes since the stream's last message (nil when none). ch is
// closed at the cache's next publication.
func (s *Service) compose(st *store.Store, c *viewCache, ss *streamState, whole bool) (*legionpb.AssignmentSet, <-chan struct{}, error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, nil, c.err
	}
	ch, gen, at := c.changed, c.gen, c.at
	set := &legionpb.AssignmentSet{Version: at, Term: c.term, Delta: !whole}
	tp := c.byNode[ss.node]
	tasksChanged := whole || tp != nil && tp.changed(ss.gen)
	// The node's values and volumes are worked out from what its tasks
	// use (and the values, nodes, Routes and Volumes themselves), not
	// from its tasks: a task that changed without using anything else
	// changes neither, nor does a Route's backend.
	usesChanged := whole || ss.resumed || tp != nil && tp.usesGen > ss.gen
	redoValues := usesChanged || c.valuesGen > ss.gen || c.nodesGen > ss.gen || c.routesGen > ss.gen
	redoVolumes := usesChanged || c.volumesGen > ss.gen
	// In no order: what is worked out from them is keyed.
	var uses []taskUses
	if (redoValues || redoVolumes) && tp != nil {
		uses = slices.Collect(maps.Values(tp.uses))
	}
	var tlsRoutes []*legion.Route
	serveHTTPS := false
	if redoValues {
		serveHTTPS = mayServeHTTPS(maps.Values(c.nodes), ss.node)
		for _, r := range sortedValues(c.routes) {
			if r.Spec.TLS != nil && r.Spec.TLS.Secret != "" {
				tlsRoutes = append(tlsRoutes, r)
			}
		}
	}
	vols := c.vols
	if whole {
		if tp != nil {
			set.Tasks = listOf(tp.items)
		} else {
			set.Tasks = [][]byte{}
		}
		c.freshEndpoints()
		set.Endpoints, set.Peers, set.Routes = c.endpoints.list(), c.peers.list(), c.routesP.list()
		set.Policies = policiesJSON(c.rules, c.members.list())
	} else {
		if tasksChanged && tp != nil {
			set.TaskChanges = itemsOf(tp.since(ss.gen))
		}
		sc := c.sharedSince(ss.gen)
		set.TypedValues, set.MembersBesideEndpoints = ss.shape.typed, ss.shape.lone
		wired := false
		if ss.sharedWire {
			// Encoded here once for the streams at the same generation,
			// rather than by each stream's Send; in the fields should
			// encoding fail (Send then says why).
			if data, err := c.encode(sc, ss.gen, ss.shape); err == nil {
				withShared(set, data)
				wired = true
			}
		}
		if !wired {
			c.fill(set, sc, ss.gen, ss.shape)
		}
		if c.rulesGen > ss.gen {
			set.PolicyRules = c.rules
		}
	}
	c.mu.Unlock()

	values, volumes := ss.values, ss.volumes
	if redoValues {
		values = nodeValues(st, uses, tlsRoutes, serveHTTPS)
	}
	if redoVolumes {
		volumes = map[string][]byte{}
		for _, v := range vols.forNode(ss.node, uses) {
			data, err := legion.MarshalJSON(v)
			if err != nil {
				return nil, nil, status.Errorf(codes.Internal, "volume %s/%s: %v", v.Metadata.Namespace, v.Metadata.Name, err)
			}
			volumes[itemKey(v.Metadata.Namespace, v.Metadata.Name)] = data
		}
	}
	if whole {
		set.Values = values
		set.Volumes = listOf(volumes)
		if len(set.Volumes) == 0 {
			set.Volumes = nil
		}
	} else if ss.resumed {
		set.ValueChanges = itemsOf(values, nil, true)
		set.VolumeChanges = itemsOf(volumes, nil, true)
	} else {
		set.ValueChanges = itemsOf(diff(ss.values, values))
		set.VolumeChanges = itemsOf(diff(ss.volumes, volumes))
	}
	ss.gen, ss.values, ss.volumes, ss.resumed = gen, values, volumes, false
	if !whole && set.TaskChanges == nil && set.ValueChanges == nil && set.VolumeChanges == nil && set.EndpointChanges == nil &&
		set.EndpointServiceChanges == nil && set.EndpointTaskChanges == nil && set.PeerChanges == nil && set.RouteChanges == nil && set.MemberChanges == nil && set.PolicyRules == nil &&
		len(sharedOf(set)) == 0 {
		return nil, ch, nil
	}
	return set, ch, nil
}

// withShared adds the changes every stream is sent alike, already in the
// wire format (fields of an AssignmentSet), to the message as it goes
// out: proto.Marshal writes the fields a message holds as unknown after
// its own, byte for byte, and fields that come after others merge into
// them as AssignmentSet.shared's do. The agent decodes them in its one
// pass over the message, as its own fields; in the shared field they
// were copied out of the message and decoded in a second pass (most of
// the 589 MB the scale run's rollout sends its 256 agents). Agents from
// before take them either way.
// The bytes are every stream's: clipped, so nothing appends into them.
func withShared(set *legionpb.AssignmentSet, wire []byte) {
	set.ProtoReflect().SetUnknown(wire[:len(wire):len(wire)])
}

// sharedOf is what withShared appended.
func sharedOf(set *legionpb.AssignmentSet) []byte { return set.ProtoReflect().GetUnknown() }

// nodeValues reads the Secrets and Configs the node's tasks use (uses),
// and the certificates of the routes it may serve.
func nodeValues(st *store.Store, uses []taskUses, tlsRoutes []*legion.Route, serveHTTPS bool) map[string][]byte {
	values := map[string][]byte{}
	for _, u := range uses {
		for _, ref := range u.values {
			key := legion.Key(ref.Kind, u.namespace, ref.Name)
			if _, done := values[key]; done {
				continue // another of the node's tasks uses it too
			}
			if data, ok := valueOf(st, ref.Kind, u.namespace, ref.Name); ok {
				values[key] = data
			}
		}
	}
	if serveHTTPS {
		for _, r := range tlsRoutes {
			// A route cannot hand nodes another Secret: only one holding
			// a certificate and a key goes.
			if data, ok := valueOf(st, legion.KindSecret, r.Metadata.Namespace, r.Spec.TLS.Secret); ok && holdsCertificate(data) {
				values[legion.Key(legion.KindSecret, r.Metadata.Namespace, r.Spec.TLS.Secret)] = data
			}
		}
	}
	return values
}

// diff is what turns from into to.
func diff(from, to map[string][]byte) (put map[string][]byte, removed []string, whole bool) {
	put = map[string][]byte{}
	for k, v := range to {
		if old, ok := from[k]; !ok || !bytes.Equal(old, v) {
			put[k] = v
		}
	}
	for k := range from {
		if _, ok := to[k]; !ok {
			removed = append(removed, k)
		}
	}
	sort.Strings(removed)
	return put, removed, false
}

// itemsOf is a part's changes as sent; nil when there are none.
func itemsOf(put map[string][]byte, removed []string, whole bool) *legionpb.Items {
	if !whole && len(put) == 0 && len(removed) == 0 {
		return nil
	}
	return &legionpb.Items{Put: legionpb.ItemsPut(put), Removed: removed, Replace: whole}
}

// listOf is a map's values in key order.
func listOf(m map[string][]byte) [][]byte {
	return sortedValues(m)
}

// policiesJSON joins the policy rules (an endpoints.Policies without
// members) and the members' list into one endpoints.Policies.
func policiesJSON(rules, members []byte) []byte {
	if len(rules) == 0 {
		rules = []byte("{}")
	}
	if string(members) == "[]" {
		return rules
	}
	out := append([]byte(nil), rules[:len(rules)-1]...)
	if string(rules) != "{}" {
		out = append(out, ',')
	}
	out = append(out, `"members":`...)
	out = append(out, members...)
	return append(out, '}')
}

// ValueRef names a Secret or Config of a task's namespace.
type ValueRef struct {
	Kind legion.Kind
	Name string
}

// ValueRefs lists the Secrets and Configs a task's pod uses: env, files
// and image pull secrets.
func ValueRefs(t *legion.Task) []ValueRef {
	var out []ValueRef
	for _, c := range t.Spec.Pod.AllContainers() {
		for _, e := range c.Env {
			if e.Secret != "" {
				out = append(out, ValueRef{legion.KindSecret, e.Secret})
			}
			if e.Config != "" {
				out = append(out, ValueRef{legion.KindConfig, e.Config})
			}
		}
		for _, f := range c.Secrets {
			out = append(out, ValueRef{legion.KindSecret, f.Name})
		}
		for _, f := range c.Configs {
			out = append(out, ValueRef{legion.KindConfig, f.Name})
		}
	}
	for _, s := range t.Spec.Pod.ImagePullSecrets {
		out = append(out, ValueRef{legion.KindSecret, s})
	}
	return out
}

// IngressLabel marks the nodes that serve HTTPS: once any node has it,
// only those read the routes' certificates.
const IngressLabel = "legion.ingress"

// holdsCertificate reports whether PEM data holds a certificate and a
// private key.
func holdsCertificate(data []byte) bool {
	var cert, key bool
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return cert && key
		}
		switch {
		case b.Type == "CERTIFICATE":
			cert = true
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			key = true
		}
	}
}
