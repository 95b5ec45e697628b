package rbac

import (
	"fmt"
	"slices"

	"github.com/legionbsd/legion"
)

// Lowered says which role user held under before, in some namespace, that
// after lowers or takes away: what ends a watch or session the user
// opened under before. Nil when every role stands (or grew).
func Lowered(before, after []*legion.RoleBinding, user string) error {
	var namespaces []string
	for _, b := range before {
		if b.Spec.User == user && !slices.Contains(namespaces, b.Metadata.Namespace) {
			namespaces = append(namespaces, b.Metadata.Namespace)
		}
	}
	slices.Sort(namespaces)
	for _, ns := range namespaces {
		was, now := Role(before, user, ns), Role(after, user, ns)
		if rank(now) >= rank(was) {
			continue
		}
		if now == "" {
			return fmt.Errorf("user %s: the role %s in namespace %s was taken away (its RoleBinding removed)", user, was, ns)
		}
		return fmt.Errorf("user %s: the role %s in namespace %s was lowered to %s", user, was, ns, now)
	}
	return nil
}
