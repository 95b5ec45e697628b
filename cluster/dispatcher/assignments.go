package dispatcher

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"sort"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/internal/endpoints"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Assignments streams the caller's node its tasks and the Secret and
// Config values they use, from this manager's replica: one whole set at
// once, and a new one after every change to tasks, Secrets or Configs that
// changes the set.
func (s *Service) Assignments(req *legionpb.AssignmentsRequest, stream grpc.ServerStreamingServer[legionpb.AssignmentSet]) error {
	ctx := stream.Context()
	id, err := caller(ctx, req.GetNode())
	if err != nil {
		return err
	}
	st, err := s.replica()
	if err != nil {
		return err
	}
	if err := s.following(ctx, st); err != nil {
		return err
	}
	var last *legionpb.AssignmentSet
	for {
		set, err := assignments(st, id.Name)
		if err != nil {
			return s.statusOf(err)
		}
		at := set.Version
		set.Version = 0 // compared without it: a set that did not change is not sent again
		if last == nil || !proto.Equal(set, last) {
			last = proto.Clone(set).(*legionpb.AssignmentSet)
			set.Version = at
			if err := stream.Send(set); err != nil {
				return err
			}
		}
		if err := s.waitChange(ctx, st, at); err != nil {
			if ctx.Err() != nil {
				return status.FromContextError(ctx.Err()).Err()
			}
			return s.statusOf(err)
		}
	}
}

// waitChange returns once a task, Secret, Config, Service, Node,
// Namespace, NetworkPolicy or Route changed after version
// at (or the history no longer reaches back), or with an error once the
// replica no longer follows a leader.
func (s *Service) waitChange(ctx context.Context, st *store.Store, at uint64) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, s.check)
		err := st.WaitChange(wctx, at, legion.KindTask, legion.KindSecret, legion.KindConfig, legion.KindService, legion.KindNode,
			legion.KindNamespace, legion.KindNetworkPolicy, legion.KindRoute)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return err
		}
		if err := s.following(ctx, st); err != nil {
			return err
		}
	}
}

// assignments reads a node's set from the local replica.
func assignments(st *store.Store, node string) (*legionpb.AssignmentSet, error) {
	objs, at, err := st.List(legion.KindTask, "", func(o legion.Object) bool {
		return o.(*legion.Task).Spec.Node == node
	})
	if err != nil {
		return nil, err
	}
	tasks := make([]*legion.Task, 0, len(objs))
	for _, o := range objs {
		tasks = append(tasks, o.(*legion.Task))
	}
	set, err := buildSet(tasks, func(kind legion.Kind, namespace, name string) ([]byte, bool) {
		o, _, err := st.Get(kind, namespace, name)
		if err != nil {
			return nil, false // admission checked it; a deleted one fails the task's start
		}
		switch v := o.(type) {
		case *legion.Secret:
			return v.Spec.Data, true
		case *legion.Config:
			return v.Spec.Data, true
		}
		return nil, false
	})
	if err != nil {
		return nil, err
	}
	eps, err := ComputeEndpoints(st)
	if err != nil {
		return nil, err
	}
	if set.Endpoints, err = json.Marshal(eps); err != nil {
		return nil, status.Errorf(codes.Internal, "endpoints: %v", err)
	}
	nodeObjs, _, err := st.List(legion.KindNode, "", nil)
	if err != nil {
		return nil, err
	}
	nodes := make([]*legion.Node, len(nodeObjs))
	for i, o := range nodeObjs {
		nodes[i] = o.(*legion.Node)
	}
	if set.Peers, err = json.Marshal(endpoints.Peers(nodes)); err != nil {
		return nil, status.Errorf(codes.Internal, "peers: %v", err)
	}
	routes, certs, err := ComputeRoutes(st, eps, node)
	if err != nil {
		return nil, err
	}
	if set.Routes, err = json.Marshal(routes); err != nil {
		return nil, status.Errorf(codes.Internal, "routes: %v", err)
	}
	if len(certs) > 0 && set.Values == nil {
		set.Values = map[string][]byte{}
	}
	for k, v := range certs {
		set.Values[k] = v
	}
	pols, err := ComputePolicies(st)
	if err != nil {
		return nil, err
	}
	if set.Policies, err = json.Marshal(pols); err != nil {
		return nil, status.Errorf(codes.Internal, "policies: %v", err)
	}
	set.Version = at
	return set, nil
}

// ComputePolicies reads the network policy state every node enforces.
func ComputePolicies(st *store.Store) (endpoints.Policies, error) {
	nsObjs, _, err := st.List(legion.KindNamespace, "", nil)
	if err != nil {
		return endpoints.Policies{}, err
	}
	polObjs, _, err := st.List(legion.KindNetworkPolicy, "", nil)
	if err != nil {
		return endpoints.Policies{}, err
	}
	taskObjs, _, err := st.List(legion.KindTask, "", func(o legion.Object) bool { return endpoints.Running(o.(*legion.Task)) })
	if err != nil {
		return endpoints.Policies{}, err
	}
	nss := make([]*legion.Namespace, len(nsObjs))
	for i, o := range nsObjs {
		nss[i] = o.(*legion.Namespace)
	}
	pols := make([]*legion.NetworkPolicy, len(polObjs))
	for i, o := range polObjs {
		pols[i] = o.(*legion.NetworkPolicy)
	}
	tasks := make([]*legion.Task, len(taskObjs))
	for i, o := range taskObjs {
		tasks[i] = o.(*legion.Task)
	}
	return endpoints.ComputePolicies(nss, pols, tasks), nil
}

// ComputeEndpoints reads every service and its ready tasks from the
// replica: what every node serves (VIPs, published ports, DNS).
func ComputeEndpoints(st *store.Store) ([]endpoints.Service, error) {
	svcObjs, _, err := st.List(legion.KindService, "", nil)
	if err != nil {
		return nil, err
	}
	taskObjs, _, err := st.List(legion.KindTask, "", func(o legion.Object) bool { return endpoints.Ready(o.(*legion.Task)) })
	if err != nil {
		return nil, err
	}
	svcs := make([]*legion.Service, len(svcObjs))
	for i, o := range svcObjs {
		svcs[i] = o.(*legion.Service)
	}
	tasks := make([]*legion.Task, len(taskObjs))
	for i, o := range taskObjs {
		tasks[i] = o.(*legion.Task)
	}
	return endpoints.Compute(svcs, tasks), nil
}

// buildSet encodes tasks (in name order) and the values they use, as
// value finds them.
func buildSet(tasks []*legion.Task, value func(kind legion.Kind, namespace, name string) ([]byte, bool)) (*legionpb.AssignmentSet, error) {
	sort.Slice(tasks, func(i, j int) bool {
		a, b := tasks[i].Metadata, tasks[j].Metadata
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	set := &legionpb.AssignmentSet{Values: map[string][]byte{}}
	for _, t := range tasks {
		data, err := legion.MarshalJSON(t)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "task %s/%s: %v", t.Metadata.Namespace, t.Metadata.Name, err)
		}
		set.Tasks = append(set.Tasks, data)
		for _, ref := range ValueRefs(t) {
			if v, ok := value(ref.Kind, t.Metadata.Namespace, ref.Name); ok {
				set.Values[legion.Key(ref.Kind, t.Metadata.Namespace, ref.Name)] = v
			}
		}
	}
	return set, nil
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

// ComputeRoutes resolves every route against the endpoints and gives the
// TLS Secrets of the routes a node may serve: only Secrets that hold a
// certificate and a key (a route cannot hand nodes another Secret), and
// only to nodes labelled legion.ingress=true once any node is.
func ComputeRoutes(st *store.Store, eps []endpoints.Service, node string) ([]endpoints.Route, map[string][]byte, error) {
	objs, _, err := st.List(legion.KindRoute, "", nil)
	if err != nil {
		return nil, nil, err
	}
	routes := make([]*legion.Route, len(objs))
	for i, o := range objs {
		routes[i] = o.(*legion.Route)
	}
	out := endpoints.ComputeRoutes(routes, eps)
	labelled, _, err := st.List(legion.KindNode, "", func(o legion.Object) bool {
		return o.GetMetadata().Labels[IngressLabel] == "true"
	})
	if err != nil {
		return nil, nil, err
	}
	mayServe := len(labelled) == 0
	for _, n := range labelled {
		mayServe = mayServe || n.GetMetadata().Name == node
	}
	certs := map[string][]byte{}
	if !mayServe {
		return out, certs, nil
	}
	for _, r := range out {
		if r.TLSSecret == "" {
			continue
		}
		o, _, err := st.Get(legion.KindSecret, r.Namespace, r.TLSSecret)
		if err != nil {
			continue // said by the proxy: a host without a certificate
		}
		data := o.(*legion.Secret).Spec.Data
		if holdsCertificate(data) {
			certs[legion.Key(legion.KindSecret, r.Namespace, r.TLSSecret)] = data
		}
	}
	return out, certs, nil
}

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
