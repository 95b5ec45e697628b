package server

import (
	"context"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/rbac"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// userOf is the calling user, or nil for the cluster admin and managers,
// who keep every right.
func userOf(ctx context.Context) *pki.Identity {
	c, _ := ctx.Value(callerKey{}).(caller)
	if c.id == nil || c.id.Role != pki.RoleUser {
		return nil
	}
	return c.id
}

// access is what a user may do, decided from this manager's replica
// before anything is forwarded, so a binding deleted takes effect here as
// soon as it replicates.
type access struct {
	user     string
	bindings []*legion.RoleBinding
}

// accessOf reads the user's bindings; nil for callers with every right.
func (s *Server) accessOf(ctx context.Context) (*access, error) {
	id := userOf(ctx)
	if id == nil {
		return nil, nil
	}
	st := s.store()
	if st == nil {
		return nil, s.notServing(s.role())
	}
	bindings, err := rbac.BindingsOf(st.List, id.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	a := &access{user: id.Name, bindings: bindings}
	return a, nil
}

// check refuses what the user may not do; a nil access may do anything.
func (a *access) check(v rbac.Verb, kind legion.Kind, namespace string) error {
	if a == nil {
		return nil
	}
	if err := rbac.Check(a.bindings, a.user, v, kind, namespace); err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return nil
}

// checkNamed is check of one object by name (rbac.CheckNamed).
func (a *access) checkNamed(v rbac.Verb, kind legion.Kind, namespace, name string) error {
	if a == nil {
		return nil
	}
	if err := rbac.CheckNamed(a.bindings, a.user, v, kind, namespace, name); err != nil {
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return nil
}

// readable keeps what the user may read, for lists and watches across
// namespaces.
func (a *access) readable(o legion.Object) bool {
	m := o.GetMetadata()
	return a == nil || a.checkNamed(rbac.Read, o.GetKind(), m.Namespace, m.Name) == nil
}

// filtersList says whether a list or watch of kind in ns (every namespace
// when "") is a user's to filter object by object, rather than to allow
// or refuse whole: across namespaces, and the Namespaces, of which a user
// sees those it has a role in.
func filtersList(kind legion.Kind, ns string) bool {
	return kind == legion.KindNamespace || ns == "" && kind.Namespaced()
}

// endWhenLowered reads the user's rights again every pki.Recheck until
// ctx ends and, once a role the stream was opened with (a) is lowered or
// taken away, ends it with the refusal through end: a watch does not go
// quiet on what its user may no longer see (9: within 5 s).
func (s *Server) endWhenLowered(ctx context.Context, a *access, end context.CancelCauseFunc, what string) {
	if a == nil {
		return
	}
	t := time.NewTicker(pki.Recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := s.accessOf(ctx)
		if err != nil {
			continue // the replica cannot say now; the next tick asks again
		}
		if err := rbac.Lowered(a.bindings, now.bindings, a.user); err != nil {
			end(status.Errorf(codes.PermissionDenied, "%s ended: %v", what, err))
			return
		}
	}
}
