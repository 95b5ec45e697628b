package server

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// countedKinds are the kinds a namespace's objects quota counts: every
// namespaced kind but Task, whose number quota.tasks bounds.
var countedKinds = func() []legion.Kind {
	var out []legion.Kind
	for _, k := range legion.Kinds() {
		if k.Namespaced() && k != legion.KindTask {
			out = append(out, k)
		}
	}
	return out
}()

// underObjectQuota reports whether an apply puts objects in a namespace
// whose quota bounds its objects: such applies are admitted one at a
// time, so two cannot both take the last place. It reads each namespace
// from this replica, which costs a lookup that finds nothing where there
// is no Namespace object.
func underObjectQuota(st *store.Store, items []applyItem) (bool, error) {
	seen := map[string]bool{}
	for _, it := range items {
		ns := it.obj.GetMetadata().Namespace
		if ns == "" || seen[ns] {
			continue
		}
		seen[ns] = true
		o, _, err := st.Get(legion.KindNamespace, "", ns)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if q := o.(*legion.Namespace).Spec.Quota; q != nil && q.Objects != nil {
			return true, nil
		}
	}
	return false, nil
}

// admitObjectQuotas refuses an apply that makes new objects in a
// namespace beyond its quota.objects: what it holds of the counted kinds
// (Count reads no object) and what the apply adds. A quota lowered
// under what a namespace holds refuses only new objects; changes and
// deletions go on.
func admitObjectQuotas(st *store.Store, a *admission) ([]string, error) {
	added := map[string][]string{}
	for _, c := range a.changed {
		m := c.obj.GetMetadata()
		if m.Namespace == "" || a.current[legion.ObjectKey(c.obj)] != nil {
			continue
		}
		added[m.Namespace] = append(added[m.Namespace], string(c.obj.GetKind())+" "+m.Name)
	}
	var errs []string
	for _, ns := range slices.Sorted(maps.Keys(added)) {
		nsObj, err := a.namespace(st, ns)
		if err != nil {
			return nil, err
		}
		if nsObj == nil || nsObj.Spec.Quota == nil || nsObj.Spec.Quota.Objects == nil {
			continue
		}
		held := 0
		for _, k := range countedKinds {
			n, err := st.Count(k, ns)
			if err != nil {
				return nil, err
			}
			held += n
		}
		if limit := *nsObj.Spec.Quota.Objects; held+len(added[ns]) > limit {
			errs = append(errs, fmt.Sprintf("over the quota of namespace %s: objects %d of %d, applying %s (it holds %d: every kind but Task)",
				ns, held+len(added[ns]), limit, strings.Join(added[ns], ", "), held))
		}
	}
	return errs, nil
}
