// Package rbac decides what a user may do (9): users hold certificates of
// the role "user" and get rights only through RoleBindings, which give a
// built-in role in one namespace. view reads everything of the namespace
// but Secrets; edit also reads Secrets and applies and deletes; admin also
// manages the namespace's RoleBindings. Users never touch cluster-scoped
// objects, but read the Namespace object of a namespace they have a role
// in (CheckNamed). The cluster admin and managers are not users: they keep every
// right, and are not asked about here.
//
// It is pure: the caller reads the user's bindings from its replica.
package rbac

import (
	"fmt"

	"github.com/legionbsd/legion"
)

// Verb is what a user asks to do.
type Verb string

// Verbs.
const (
	Read  Verb = "read"  // get, list, watch, logs
	Write Verb = "write" // apply, delete, exec, port-forward
)

// rank orders the roles; a higher one holds the lower ones' rights.
func rank(r legion.Role) int {
	switch r {
	case legion.RoleView:
		return 1
	case legion.RoleEdit:
		return 2
	case legion.RoleAdmin:
		return 3
	}
	return 0
}

// Role is the highest role the bindings give user in namespace ("" when
// none).
func Role(bindings []*legion.RoleBinding, user, namespace string) legion.Role {
	var best legion.Role
	for _, b := range bindings {
		if b.Metadata.Namespace == namespace && b.Spec.User == user && rank(b.Spec.Role) > rank(best) {
			best = b.Spec.Role
		}
	}
	return best
}

// Needs is the least role that allows verb on kind in a namespace.
func Needs(v Verb, kind legion.Kind) legion.Role {
	switch {
	case kind == legion.KindRoleBinding && v == Write:
		return legion.RoleAdmin
	case kind == legion.KindSecret, v == Write:
		return legion.RoleEdit
	}
	return legion.RoleView
}

// Check says whether user may do verb on objects of kind in namespace,
// and if not, why, naming what is missing.
func Check(bindings []*legion.RoleBinding, user string, v Verb, kind legion.Kind, namespace string) error {
	if !kind.Namespaced() {
		return fmt.Errorf("user %s: %s are cluster-scoped and users act in namespaces only", user, kind.Plural())
	}
	if kind == legion.KindTask && v == Write {
		return fmt.Errorf("user %s: tasks are written by the cluster only", user)
	}
	return CheckAction(bindings, user, v, kind, namespace, fmt.Sprintf("%s %s", v, kind.Plural()))
}

// CheckNamed is Check of one object, named: besides what Check allows, a
// user may read the Namespace object of a namespace it has a role in, to
// see the quota its work is held to, what it uses of it and what the
// namespace allows, as Kubernetes' view role reads a namespace's
// ResourceQuotas.
func CheckNamed(bindings []*legion.RoleBinding, user string, v Verb, kind legion.Kind, namespace, name string) error {
	if kind == legion.KindNamespace && v == Read && name != "" {
		if Role(bindings, user, name) != "" {
			return nil
		}
		return fmt.Errorf("user %s has no role in namespace %s (to read its Namespace it needs %s)", user, name, legion.RoleView)
	}
	return Check(bindings, user, v, kind, namespace)
}

// CheckAction is Check of what an action needs (v on objects of kind),
// saying it in the action's words ("use exec") when refused.
func CheckAction(bindings []*legion.RoleBinding, user string, v Verb, kind legion.Kind, namespace, action string) error {
	need, have := Needs(v, kind), Role(bindings, user, namespace)
	if rank(have) >= rank(need) {
		return nil
	}
	if have == "" {
		return fmt.Errorf("user %s has no role in namespace %s (to %s it needs %s)", user, namespace, action, need)
	}
	return fmt.Errorf("user %s is %s in namespace %s; to %s it needs %s", user, have, namespace, action, need)
}

// Lister lists objects of a kind, as a store or the Pods service's view of
// one does.
type Lister func(kind legion.Kind, namespace string, keep func(legion.Object) bool) ([]legion.Object, uint64, error)

// BindingsOf reads user's RoleBindings in every namespace.
func BindingsOf(list Lister, user string) ([]*legion.RoleBinding, error) {
	objs, _, err := list(legion.KindRoleBinding, "", func(o legion.Object) bool {
		return o.(*legion.RoleBinding).Spec.User == user
	})
	if err != nil {
		return nil, err
	}
	out := make([]*legion.RoleBinding, len(objs))
	for i, o := range objs {
		out[i] = o.(*legion.RoleBinding)
	}
	return out, nil
}
