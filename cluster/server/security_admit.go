package server

import (
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// admitSecurity refuses a changed Service, Job or CronJob whose containers
// loosen their jails more than the namespace's spec.security.allow lists
// (9), naming each field and the entry it would need. A namespace without
// a Namespace object allows nothing beyond the jail defaults.
func admitSecurity(st *store.Store, a *admission) ([]string, error) {
	var errs []string
	for _, c := range a.changed {
		pod := legion.PodOf(c.obj)
		if pod == nil {
			continue
		}
		path := "spec.pod"
		if c.obj.GetKind() == legion.KindCronJob {
			path = "spec.job.pod"
		}
		ns := c.obj.GetMetadata().Namespace
		sec, err := a.security(st, ns)
		if err != nil {
			return nil, err
		}
		if msg := sec.ExcessMessage(ns, pod, path); msg != "" {
			errs = append(errs, fmt.Sprintf("%s %s: %s", c.obj.GetKind(), legion.DisplayName(c.obj), msg))
		}
	}
	return errs, nil
}
