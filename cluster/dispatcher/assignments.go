package dispatcher

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Assignments streams the caller's node its tasks and the Secret and
// Config values they use, from this manager's replica: one whole set at
// once, and a new one after every change to tasks, Secrets, Configs,
// Volumes or what else it carries that changes the set.
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
	if err := s.following(ctx, st); err != nil {
		return err
	}
	if err := s.holds(ctx, st, id, leaf, false); err != nil {
		return err
	}
	var last *legionpb.AssignmentSet
	for {
		set, err := s.assignments(st, id.Name)
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
		// The removal of the node is a Config change, which wakes the
		// wait: the stream ends with the refusal at once.
		if err := Revoked(st, leaf); err != nil {
			return err
		}
	}
}

// waitChange returns once a task, Secret, Config, Service, Node,
// Namespace, NetworkPolicy, Route or Volume changed after version
// at (or the history no longer reaches back), or with an error once the
// replica no longer follows a leader.
func (s *Service) waitChange(ctx context.Context, st *store.Store, at uint64) error {
	for {
		wctx, cancel := context.WithTimeout(ctx, s.check)
		err := st.WaitChange(wctx, at, legion.KindTask, legion.KindSecret, legion.KindConfig, legion.KindService, legion.KindNode,
			legion.KindNamespace, legion.KindNetworkPolicy, legion.KindRoute, legion.KindVolume)
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
func (s *Service) assignments(st *store.Store, node string) (*legionpb.AssignmentSet, error) {
	v, err := readView(st, node, s.volumeIndexAt)
	if err != nil {
		return nil, err
	}
	set := &legionpb.AssignmentSet{Values: v.Values, Version: v.At}
	for _, t := range v.Tasks {
		data, err := legion.MarshalJSON(t)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "task %s/%s: %v", t.Metadata.Namespace, t.Metadata.Name, err)
		}
		set.Tasks = append(set.Tasks, data)
	}
	for _, vol := range v.Volumes {
		data, err := legion.MarshalJSON(vol)
		if err != nil {
			return nil, status.Errorf(codes.Internal, "volume %s/%s: %v", vol.Metadata.Namespace, vol.Metadata.Name, err)
		}
		set.Volumes = append(set.Volumes, data)
	}
	for _, f := range []struct {
		dst  *[]byte
		what string
		v    any
	}{{&set.Endpoints, "endpoints", v.Endpoints}, {&set.Peers, "peers", v.Peers}, {&set.Routes, "routes", v.Routes}, {&set.Policies, "policies", v.Policies}} {
		if *f.dst, err = json.Marshal(f.v); err != nil {
			return nil, status.Errorf(codes.Internal, "%s: %v", f.what, err)
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
