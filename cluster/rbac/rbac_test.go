package rbac

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

func binding(ns, user string, role legion.Role) *legion.RoleBinding {
	b := &legion.RoleBinding{}
	b.Metadata.Namespace, b.Spec.User, b.Spec.Role = ns, user, role
	return b
}

func TestCheck(t *testing.T) {
	bs := []*legion.RoleBinding{
		binding("shop", "alice", legion.RoleView),
		binding("lab", "alice", legion.RoleEdit),
		binding("lab", "alice", legion.RoleView), // the higher one counts
		binding("ops", "alice", legion.RoleAdmin),
		binding("shop", "bob", legion.RoleAdmin),
	}
	for _, tc := range []struct {
		v    Verb
		kind legion.Kind
		ns   string
		err  string // "" allowed
	}{
		{Read, legion.KindService, "shop", ""},
		{Read, legion.KindRoleBinding, "shop", ""},
		{Read, legion.KindSecret, "shop", "alice is view in namespace shop; to read Secrets it needs edit"},
		{Write, legion.KindService, "shop", "needs edit"},
		{Write, legion.KindNetworkPolicy, "shop", "to write NetworkPolicies it needs edit"},
		{Write, legion.KindService, "lab", ""},
		{Read, legion.KindSecret, "lab", ""},
		{Write, legion.KindRoleBinding, "lab", "is edit in namespace lab; to write RoleBindings it needs admin"},
		{Write, legion.KindRoleBinding, "ops", ""},
		{Write, legion.KindTask, "ops", "written by the cluster only"},
		{Read, legion.KindConfig, "other", "has no role in namespace other"},
		{Read, legion.KindNode, "", "cluster-scoped"},
		{Write, legion.KindNamespace, "", "cluster-scoped"},
		{Read, legion.KindImagePolicy, "", "ImagePolicies are cluster-scoped"},
	} {
		err := Check(bs, "alice", tc.v, tc.kind, tc.ns)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s %s in %q: %v, want %q", tc.v, tc.kind, tc.ns, err, tc.err)
		}
	}
	if r := Role(bs, "carol", "shop"); r != "" {
		t.Errorf("a user without bindings has role %q", r)
	}
}

// A user reads the Namespace object of a namespace it has a role in, and
// no other; it never writes one.
func TestCheckNamed(t *testing.T) {
	bs := []*legion.RoleBinding{binding("shop", "alice", legion.RoleView), binding("ops", "alice", legion.RoleAdmin)}
	for _, tc := range []struct {
		v    Verb
		kind legion.Kind
		ns   string
		name string
		err  string // "" allowed
	}{
		{Read, legion.KindNamespace, "", "shop", ""},
		{Read, legion.KindNamespace, "", "ops", ""},
		{Read, legion.KindNamespace, "", "lab", "user alice has no role in namespace lab (to read its Namespace it needs view)"},
		{Write, legion.KindNamespace, "", "ops", "Namespaces are cluster-scoped"},
		{Read, legion.KindNode, "", "shop", "Nodes are cluster-scoped"},
		{Read, legion.KindConfig, "shop", "c", ""},
		{Read, legion.KindSecret, "shop", "s", "needs edit"},
	} {
		err := CheckNamed(bs, "alice", tc.v, tc.kind, tc.ns, tc.name)
		if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s %s %q in %q: %v, want %q", tc.v, tc.kind, tc.name, tc.ns, err, tc.err)
		}
	}
}
