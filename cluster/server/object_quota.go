package server

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// admitObjectQuotas refuses an apply that makes new objects in a
// namespace beyond its quota.objects: what it holds of the counted kinds
// (Count reads no object) and what the apply adds. A quota lowered
// under what a namespace holds refuses only new objects; changes and
// deletions go on. Such an apply is marked to be admitted again holding
// the apply lock (applyItems), so two cannot both take the last place.
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
		a.serialise = true
		held, err := st.CountOf(legion.ObjectQuotaKinds(), ns)
		if err != nil {
			return nil, err
		}
		if limit := *nsObj.Spec.Quota.Objects; held+len(added[ns]) > limit {
			errs = append(errs, fmt.Sprintf("over the quota of namespace %s: objects %d of %d, applying %s (it holds %d: every kind but Task)",
				ns, held+len(added[ns]), limit, strings.Join(added[ns], ", "), held))
		}
	}
	return errs, nil
}
