package rbac

import (
	"testing"

	"github.com/legionbsd/legion"
)

func TestLowered(t *testing.T) {
	t.Parallel()
	shopEdit, shopView, devAdmin := binding("shop", "alice", legion.RoleEdit), binding("shop", "alice", legion.RoleView), binding("dev", "alice", legion.RoleAdmin)
	cases := []struct {
		name          string
		before, after []*legion.RoleBinding
		says          string // "" for nil
	}{
		{"unchanged", []*legion.RoleBinding{shopEdit, devAdmin}, []*legion.RoleBinding{shopEdit, devAdmin}, ""},
		{"grown", []*legion.RoleBinding{shopView}, []*legion.RoleBinding{shopEdit}, ""},
		{"a new namespace only", nil, []*legion.RoleBinding{shopEdit}, ""},
		{"taken", []*legion.RoleBinding{shopEdit, devAdmin}, []*legion.RoleBinding{devAdmin}, "user alice: the role edit in namespace shop was taken away (its RoleBinding removed)"},
		{"lowered", []*legion.RoleBinding{shopEdit}, []*legion.RoleBinding{shopView}, "user alice: the role edit in namespace shop was lowered to view"},
		{"everything taken", []*legion.RoleBinding{shopEdit, devAdmin}, nil, "user alice: the role admin in namespace dev was taken away (its RoleBinding removed)"},
		{"another user's binding", []*legion.RoleBinding{binding("shop", "bob", legion.RoleEdit)}, nil, ""},
	}
	for _, tc := range cases {
		err := Lowered(tc.before, tc.after, "alice")
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.says {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.says)
		}
	}
}
