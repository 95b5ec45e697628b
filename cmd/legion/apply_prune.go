package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/scheduler"
)

// pruneKinds are the kinds apply --prune deletes, as kubectl's default
// list has them: workloads, the Configs and Secrets they read, and
// Routes. Namespaces and Volumes (data), and RoleBindings,
// NetworkPolicies and ImagePolicies (who may do what, what may reach
// what, what may run), are never pruned: they are deleted by name.
var pruneKinds = []legion.Kind{legion.KindService, legion.KindJob, legion.KindCronJob, legion.KindConfig, legion.KindSecret, legion.KindRoute}

// pruneKindsText says which kinds --prune deletes, for its usage.
const pruneKindsText = "services, jobs, cron jobs, configs, secrets and routes (never namespaces, volumes, role bindings or policies)"

// pruneApplied deletes what apply --prune removes: each object of
// pruneKinds that sel selects, in a namespace the apply wrote to, that
// is not among what it applied (res). A CronJob's Jobs are its, not the
// manifests'. Each is deleted at the version listed, so one changed
// meanwhile is left and named; with dryRun nothing is deleted.
func pruneApplied(ctx context.Context, cl *client.Client, out, errOut io.Writer, res []client.Result, sel *scopeFlags, dryRun bool) error {
	applied := map[string]bool{}
	var namespaces []string
	for _, r := range res {
		applied[legion.ObjectKey(r.Object)] = true
		if ns := r.Object.GetMetadata().Namespace; ns != "" && !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
	}
	slices.Sort(namespaces)
	var errs []error
	for _, ns := range namespaces {
		for _, kind := range pruneKinds {
			f := *sel
			f.namespace = ns
			opts, err := f.options()
			if err != nil {
				return err
			}
			objs, _, err := cl.List(ctx, kind, opts)
			if err != nil {
				errs = append(errs, fmt.Errorf("listing %s in namespace %s: %w", plural(strings.ToLower(string(kind))), ns, err))
				continue
			}
			for _, o := range f.keep(objs) {
				m := o.GetMetadata()
				if applied[legion.ObjectKey(o)] || m.Labels[scheduler.LabelCronJob] != "" {
					continue
				}
				if dryRun {
					fmt.Fprintf(out, "%s pruned (dry run)\n", ref(o))
					continue
				}
				v := m.Version
				gone, err := cl.Delete(ctx, kind, ns, m.Name, &v)
				switch {
				case errors.Is(err, client.ErrNotFound):
					continue // gone already
				case errors.Is(err, client.ErrAborted):
					errs = append(errs, fmt.Errorf("%s changed since it was listed: not pruned", ref(o)))
					continue
				case err != nil:
					errs = append(errs, fmt.Errorf("pruning %s: %w", ref(o), err))
					continue
				}
				fmt.Fprintf(out, "%s pruned\n", ref(gone))
				if kind == legion.KindService {
					noteClaimsKept(ctx, errOut, cl, gone)
				}
			}
		}
	}
	return errors.Join(errs...)
}
