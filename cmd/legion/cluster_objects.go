package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/scheduler"
	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
)

// scopeFlags are -n, -A and -l.
type scopeFlags struct {
	namespace string
	all       bool
	labels    []string
	// match is -l as read by options: every object listed with the
	// options is kept only if it matches.
	match labels.Selector
	// fields is --field-selector, and terms it as read by options: the
	// objects listed are kept only if their fields hold every term.
	fields []string
	terms  []fieldTerm
}

// selectorUsage is -l's help, of get, watch and delete alike.
const selectorUsage = "only objects whose labels match, as kubectl's selectors: key=value, key!=value, key in (a,b), key notin (a,b), key, !key (comma-separated or repeated: all must hold)"

func (f *scopeFlags) add(cmd *cobra.Command, withAll bool) {
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "namespace (default: default)")
	if withAll {
		cmd.Flags().BoolVarP(&f.all, "all-namespaces", "A", false, "every namespace")
		cmd.Flags().StringArrayVarP(&f.labels, "selector", "l", nil, selectorUsage)
		cmd.Flags().StringArrayVar(&f.fields, "field-selector", nil, fieldUsage)
	}
}

// options are the list options of -n, -A and -l, and f.match the whole
// of -l. The manager selects by equal labels only, so the rest of a
// selector (!=, in, notin, exists) is kept by keep after the listing.
func (f *scopeFlags) options() (client.ListOptions, error) {
	opts := client.ListOptions{Namespace: f.namespace, AllNamespaces: f.all}
	sel, err := labels.Parse(strings.Join(f.labels, ","))
	if err != nil {
		return opts, fmt.Errorf("-l %s: %w", strings.Join(f.labels, ","), err)
	}
	f.match = sel
	if f.terms, err = parseFieldSelector(f.fields); err != nil {
		return opts, err
	}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		if op := r.Operator(); op == selection.Equals || op == selection.DoubleEquals {
			if opts.Labels == nil {
				opts.Labels = map[string]string{}
			}
			opts.Labels[r.Key()] = r.ValuesUnsorted()[0]
		}
	}
	return opts, nil
}

// selects: -l or --field-selector is given.
func (f *scopeFlags) selects() bool { return len(f.labels) > 0 || len(f.fields) > 0 }

// keep is the objects -l and --field-selector select, of those listed
// with options.
func (f *scopeFlags) keep(objs []legion.Object) []legion.Object {
	if (f.match == nil || f.match.Empty()) && len(f.terms) == 0 {
		return objs
	}
	return slices.DeleteFunc(objs, func(o legion.Object) bool {
		return f.match != nil && !f.match.Matches(labels.Set(o.GetMetadata().Labels)) || !matchFields(o, f.terms)
	})
}

// keyValues reads a flag's key=value pairs, each given alone or several
// comma-separated, into a map (nil when none are given).
func keyValues(flag string, args []string) (map[string]string, error) {
	var out map[string]string
	for _, a := range args {
		for _, kv := range strings.Split(a, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%s %q: expected key=value", flag, kv)
			}
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out, nil
}

func (c *clusterCLI) applyCommand() *cobra.Command {
	var files []string
	var ns string
	var dryRun, prune bool
	var sel scopeFlags
	var wf waitFlags
	var out appliedOutput
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR|URL|-",
		Short: "Create or update objects from manifests (server-side apply)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			if wf.wait && dryRun {
				return errors.New("apply: --wait and --dry-run: a dry run starts nothing to wait for")
			}
			if prune && len(sel.labels) == 0 {
				return errors.New("apply: --prune needs -l SELECTOR: it deletes the objects with those labels that the manifests no longer hold")
			}
			if _, err := sel.options(); err != nil {
				return fmt.Errorf("apply: %w", err)
			}
			if err := out.check("apply"); err != nil {
				return err
			}
			objs, res, cl, err := c.applyFile(cmd, "apply", files, ns, client.ApplyOptions{DryRun: dryRun, Brief: out.brief()}, &sel)
			if err != nil {
				return err
			}
			defer cl.Close()
			suffix := ""
			if dryRun {
				suffix = " (dry run)"
			}
			if out.output != "" {
				stored := make([]legion.Object, len(res))
				for i, r := range res {
					stored[i] = r.Object
				}
				if err := out.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), stored); err != nil {
					return err
				}
			} else {
				for _, r := range res {
					fmt.Fprintf(cmd.OutOrStdout(), "%s %s%s\n", ref(r.Object), r.Outcome, suffix)
				}
			}
			if prune {
				if err := pruneApplied(ctxOf(cmd), cl, cmd.OutOrStdout(), cmd.ErrOrStderr(), res, &sel, dryRun); err != nil {
					return fmt.Errorf("apply --prune: %w", err)
				}
			}
			if !dryRun {
				// Stored, but not all as the manifests say: said beside.
				warnApplied(cmd.ErrOrStderr(), objs, listWith(ctxOf(cmd), cl))
				warnStale(cmd.ErrOrStderr(), res, listWith(ctxOf(cmd), cl))
			}
			if !wf.wait {
				return nil
			}
			// Each Service applied is followed in turn, and each Job to
			// its end; the first that fails ends the wait with its code.
			for _, r := range res {
				m := r.Object.GetMetadata()
				var err error
				switch r.Object.(type) {
				case *legion.Service, *legion.Job:
					err = followObject(ctxOf(cmd), cl, cmd.OutOrStdout(), r.Object.GetKind(), m.Namespace, m.Name, "", wf.timeout)
				case *legion.CronJob:
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: --wait: %s makes its Jobs on its schedule, and is not waited for (legion get jobs -l %s=%s)\n",
						ref(r.Object), scheduler.LabelCronJob, m.Name)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	fileFlag(cmd, &files, "the manifests to apply")
	manifestNamespaceFlag(cmd, &ns)
	cmd.Flags().StringArrayVarP(&sel.labels, "selector", "l", nil, "apply only the manifests' objects with these labels (kubectl's selectors: k=v, k!=v, k in (a,b), k, !k); with --prune, what it may delete")
	cmd.Flags().BoolVar(&prune, "prune", false, "with -l, delete the objects with those labels, in the namespaces applied to, that the manifests no longer hold: "+pruneKindsText)
	cmd.Flags().Var((*dryRunFlag)(&dryRun), "dry-run", "say what would change, write nothing: the cluster checks the objects as for an apply (kubectl's --dry-run=server)")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "true"
	// kubectl's, hidden: an apply here is server-side; a change is
	// recorded in the audit log and a service's previous spec already.
	for name, f := range map[string]*kubectlFlag{
		"server-side": {ok: isTrue, bool: true, why: "an apply here is always server-side: the cluster merges and admits it"},
		"record":      {bool: true, why: "every change is recorded already: legion audit lists who changed what, and legion rollout history a service's previous spec"},
	} {
		flag := cmd.Flags().VarPF(f, name, "", "kubectl's")
		flag.NoOptDefVal, flag.Hidden = "true", true
	}
	wf.add(cmd)
	out.add(cmd)
	cmd.Flags().Lookup("wait").Usage = "follow what was applied: exit 0 once every service's tasks run its pod and are ready and every job completed, " +
		"1 if an update pauses or its failure rolls it back or a job fails, 2 on the timeout"
	return cmd
}

// applyFile has the cluster apply the manifests read from file (a file,
// a directory of them, or - for standard input); what names the command
// in the error of a refused apply. It returns the objects read, what the
// cluster did, and the connection, still open for what follows: the
// caller closes it.
func (c *clusterCLI) applyFile(cmd *cobra.Command, what string, files []string, ns string, opts client.ApplyOptions, sel *scopeFlags) ([]legion.Object, []client.Result, *client.Client, error) {
	objs, err := manifestObjects(cmd, what, files, ns, sel)
	if err != nil {
		return nil, nil, nil, err
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	res, err := cl.Apply(ctxOf(cmd), objs, opts)
	if err != nil {
		cl.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return objs, res, cl, nil
}

// manifestObjects reads the objects of the manifests in files for the
// command what (apply, create): none is an error, and with sel's -l only
// the objects it selects are kept, saying how many are left out.
func manifestObjects(cmd *cobra.Command, what string, files []string, ns string, sel *scopeFlags) ([]legion.Object, error) {
	objs, err := readManifests(cmd.InOrStdin(), files, ns)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		// An empty file, or a command before the pipe that failed.
		names := slices.Clone(files)
		for i, f := range names {
			if f == "-" {
				names[i] = "standard input"
			}
		}
		return nil, fmt.Errorf("%s: no object in %s", what, strings.Join(names, ", "))
	}
	if sel != nil && len(sel.labels) > 0 {
		// kubectl's -l with -f: the objects it selects, the others left.
		n := len(objs)
		if objs = sel.keep(objs); len(objs) < n {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: %d of the manifests' %d objects are not %s: their labels do not match -l %s\n", n-len(objs), n, map[string]string{"apply": "applied", "create": "created"}[what], strings.Join(sel.labels, ","))
		}
		if len(objs) == 0 {
			return nil, fmt.Errorf("%s: no object of the manifests has labels that match -l %s", what, strings.Join(sel.labels, ","))
		}
	}
	return objs, nil
}

// fileFlag adds -f, the manifests a command reads: repeatable, as
// kubectl's is (each one read, in turn).
func fileFlag(cmd *cobra.Command, files *[]string, usage string) {
	fl := cmd.Flags()
	fl.StringArrayVarP(files, "filename", "f", nil, usage+": a file, a directory of them, an http(s) URL, or - for standard input (repeatable)")
	// kubectl's flags beside -f, hidden: what Legion does anyway is taken,
	// the rest refused saying why, rather than "unknown flag".
	for _, k := range []struct {
		name, short string
		f           kubectlFlag
	}{
		{"kustomize", "k", kubectlFlag{why: "kustomize is not built in: run kustomize build VALUE | legion " + cmd.Name() + " -f -"}},
		{"recursive", "R", kubectlFlag{ok: always, bool: true, why: ""}}, // a directory is always read to its depth
		{"validate", "", kubectlFlag{ok: func(v string) bool { return v == "strict" || isTrue(v) }, why: "the cluster checks every object it is given, against its kind's fields (unknown ones refused): that is not turned off"}},
	} {
		f := k.f
		flag := fl.VarPF(&f, k.name, k.short, "kubectl's")
		if f.bool {
			flag.NoOptDefVal = "true"
		}
		flag.Hidden = true
	}
}

// manifestNamespaceFlag adds -n to a command that reads manifests, as
// kubectl takes it there (see legion.ParseManifestIn).
func manifestNamespaceFlag(cmd *cobra.Command, ns *string) {
	cmd.Flags().StringVarP(ns, "namespace", "n", "", "the namespace of the manifests' objects that name none (default: default); one naming another is refused")
}

// ref names an object as kubectl does: kind/name, with the namespace.
func ref(o legion.Object) string {
	m := o.GetMetadata()
	return refOf(o.GetKind(), m.Namespace, m.Name)
}

// refOf is ref of the object of kind in namespace ns named name: the
// namespace is said outside the default one.
func refOf(kind legion.Kind, ns, name string) string {
	s := strings.ToLower(string(kind)) + "/" + name
	if ns != "" && ns != legion.DefaultNamespace {
		s += " -n " + ns
	}
	return s
}

// query checks what get and watch were asked (the kind, the output
// format, the scope flags) and connects; the caller closes the client.
func (c *clusterCLI) query(cmd *cobra.Command, kindArg, output string, f *scopeFlags) (legion.Kind, format, client.ListOptions, *client.Client, error) {
	kind, err := resolveKind(kindArg)
	if err != nil {
		return "", format{}, client.ListOptions{}, nil, err
	}
	fm, err := parseOutput(output)
	if err != nil {
		return "", format{}, client.ListOptions{}, nil, err
	}
	opts, err := f.options()
	if err != nil {
		return "", format{}, client.ListOptions{}, nil, err
	}
	if err := checkFieldTerms(f.terms, kind); err != nil {
		return "", format{}, client.ListOptions{}, nil, err
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return "", format{}, client.ListOptions{}, nil, err
	}
	return kind, fm, opts, cl, nil
}

// userScope is what an empty listing adds when a user lists every
// namespace: the manager lists only those where the user has a role, so
// "No tasks found." alone would say the cluster has none. Empty for
// anyone else, and for one namespace.
func userScope(cl *client.Client, all bool) string {
	if u := cl.User(); u != "" && all {
		return " in the namespaces where user " + u + " has a role"
	}
	return ""
}

// allKinds are what get all lists, as kubectl's all lists a namespace's
// workloads and their pods: Services, Jobs, CronJobs and Tasks.
var allKinds = []legion.Kind{legion.KindService, legion.KindJob, legion.KindCronJob, legion.KindTask}

// getKinds is get all, and get of kinds listed with commas (kubectl's
// get svc,cfg): a table of each kind that has objects, names as kind/name
// (kubectl's form); any other format has them all as one list.
func (c *clusterCLI) getKinds(cmd *cobra.Command, kinds []legion.Kind, output string, f *scopeFlags, lf *listFlags) error {
	_, fm, opts, cl, err := c.query(cmd, string(kinds[0]), output, f)
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := checkFieldTerms(f.terms, kinds...); err != nil {
		return err
	}
	var all []legion.Object
	for _, k := range kinds {
		objs, _, err := cl.List(ctxOf(cmd), k, opts)
		if err != nil {
			return fmt.Errorf("listing %s: %w", plural(strings.ToLower(string(k))), err)
		}
		all = append(all, f.keep(objs)...)
	}
	if len(all) == 0 && (fm.name == "table" || fm.name == "wide") {
		_, err := fmt.Fprintf(cmd.ErrOrStderr(), "No %s found%s.\n", kindWordsOr(kinds), userScope(cl, opts.AllNamespaces))
		return err
	}
	if err := lf.apply(&fm, all); err != nil {
		return err
	}
	return printGrouped(cmd, all, fm, grouping{withNamespace: f.all, kindNames: true, lf: lf})
}

// kindList reads kubectl's list of kinds, svc,cfg: each once, in the
// order given, all standing for get all's kinds.
func kindList(arg string) ([]legion.Kind, error) {
	var kinds []legion.Kind
	for _, word := range strings.Split(arg, ",") {
		ks := allKinds
		if !strings.EqualFold(word, "all") {
			k, err := resolveKind(word)
			if err != nil {
				return nil, err
			}
			ks = []legion.Kind{k}
		}
		for _, k := range ks {
			if !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	return kinds, nil
}

// kindWordsOr names kinds for "No ... found.": services, configs or tasks.
func kindWordsOr(kinds []legion.Kind) string {
	if slices.Equal(kinds, allKinds) {
		return "services, jobs, cron jobs or tasks"
	}
	words := make([]string, len(kinds))
	for i, k := range kinds {
		words[i] = plural(strings.ToLower(string(k)))
	}
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// getNamed is get of objects named (named's forms): one alone as get
// KIND NAME prints it, several in a table per kind, names as kind/name
// when the kinds differ, as get all prints them. One that cannot be read
// is said after the others are printed.
func (c *clusterCLI) getNamed(cmd *cobra.Command, use string, args []string, output string, f *scopeFlags, lf *listFlags) error {
	targets, err := named(use, args, f.namespace)
	if err != nil {
		return err
	}
	fm, err := parseOutput(output)
	if err != nil {
		return err
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	var objs []legion.Object
	var errs []error
	for _, t := range targets {
		m := t.GetMetadata()
		o, err := cl.Get(ctxOf(cmd), t.GetKind(), m.Namespace, m.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		objs = append(objs, o)
	}
	// Kinds are named when several were asked, as kubectl names them,
	// also when only one kind's objects were found.
	kinds := map[legion.Kind]bool{}
	for _, o := range targets {
		kinds[o.GetKind()] = true
	}
	if err := lf.apply(&fm, objs); err != nil {
		return err
	}
	if err := printGrouped(cmd, objs, fm, grouping{single: len(targets) == 1, kindNames: len(kinds) > 1, lf: lf}); err != nil {
		return err
	}
	warnListed(cmd.ErrOrStderr(), objs, listWith(ctxOf(cmd), cl))
	return errors.Join(errs...)
}

// addLabels adds kubectl's --show-labels column to a table of objs (one
// row each), unless the kind's table has one already.
func addLabels(l *listing, objs []legion.Object) {
	if slices.ContainsFunc(l.columns, func(c column) bool { return c.name == "LABELS" }) {
		return
	}
	vals := make([]string, len(objs))
	for i, o := range objs {
		vals[i] = labelString(o.GetMetadata().Labels)
	}
	l.addColumn("LABELS", vals)
}

// grouping is how printGrouped prints: with a NAMESPACE column, one
// object alone (single), names as kind/name, with the columns lf adds.
type grouping struct {
	withNamespace, single, kindNames bool
	lf                               *listFlags
}

// printGrouped prints objects of one or more kinds: in a format other
// than a table as one list (the object alone when g.single), else a
// table per kind in the order they come.
func printGrouped(cmd *cobra.Command, objs []legion.Object, fm format, g grouping) error {
	now := time.Now()
	withNamespace := g.withNamespace
	if fm.name != "table" && fm.name != "wide" {
		l := objectListing(objs, withNamespace, g.single, now)
		return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
	}
	var kinds []legion.Kind
	byKind := map[legion.Kind][]legion.Object{}
	for _, o := range objs {
		k := o.GetKind()
		if byKind[k] == nil {
			kinds = append(kinds, k)
		}
		byKind[k] = append(byKind[k], o)
	}
	for i, k := range kinds {
		if i > 0 {
			fmt.Fprintln(cmd.OutOrStdout())
		}
		l := objectListing(byKind[k], withNamespace, g.single, now)
		if g.lf != nil {
			g.lf.decorate(&l, byKind[k])
		}
		if g.kindNames {
			l.kindNames()
		}
		if err := l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm); err != nil {
			return err
		}
	}
	return nil
}

func (c *clusterCLI) getCommand(use string) *cobra.Command {
	var f scopeFlags
	var lf listFlags
	var output string
	var watch, watchOnly bool
	cmd := &cobra.Command{
		Use:   use + " KIND [NAME...] | " + use + " KIND/NAME...",
		Short: "Show one object, or list the objects of a kind (all: the services, jobs, cron jobs and tasks)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			watch = watch || watchOnly
			if strings.Contains(args[0], ",") && !strings.Contains(args[0], "/") {
				// kubectl get svc,cfg [NAME...]: each kind's listing, or
				// each kind's object of each name.
				kinds, err := kindList(args[0])
				if err != nil {
					return err
				}
				switch {
				case watch:
					return fmt.Errorf("%s %s -w: a watch follows one kind (legion get KIND -w)", use, args[0])
				case len(args) == 1:
					return c.getKinds(cmd, kinds, output, &f, &lf)
				case f.all || f.selects():
					return fmt.Errorf("%s %s: objects named are read in one namespace (-n), without -A, -l or --field-selector", use, strings.Join(args, " "))
				}
				var each []string
				for _, name := range args[1:] {
					for _, k := range kinds {
						each = append(each, strings.ToLower(string(k))+"/"+name)
					}
				}
				return c.getNamed(cmd, use, each, output, &f, &lf)
			}
			if len(args) > 2 || strings.Contains(args[0], "/") {
				// kubectl get svc/web job/migrate, get svc web api.
				switch {
				case watch:
					return fmt.Errorf("%s %s -w: a watch follows one kind, or one object (%s KIND [NAME] -w)", use, strings.Join(args, " "), use)
				case f.all || f.selects():
					return fmt.Errorf("%s %s: objects named are read in one namespace (-n), without -A, -l or --field-selector", use, strings.Join(args, " "))
				}
				return c.getNamed(cmd, use, args, output, &f, &lf)
			}
			if strings.EqualFold(args[0], "all") {
				if len(args) == 2 {
					return fmt.Errorf("get all %s: all lists every workload of a namespace and takes no NAME", args[1])
				}
				if watch {
					return errors.New("get all -w: a watch follows one kind (legion get KIND -w)")
				}
				return c.getKinds(cmd, allKinds, output, &f, &lf)
			}
			if len(args) == 2 && f.all {
				return fmt.Errorf("%s %s %s -A: an object is read by name in one namespace (-n), not across all", use, args[0], args[1])
			}
			if len(args) == 2 && len(f.labels) > 0 {
				return fmt.Errorf("%s %s %s -l: a name and a label selector do not go together: name the object or select by label", use, args[0], args[1])
			}
			if len(args) == 2 && len(f.fields) > 0 {
				return fmt.Errorf("%s %s %s --field-selector: a name and a field selector do not go together: name the object or select by field", use, args[0], args[1])
			}
			if len(args) == 2 && !watch {
				return c.getNamed(cmd, use, args, output, &f, &lf)
			}
			kind, fm, opts, cl, err := c.query(cmd, args[0], output, &f)
			if err != nil {
				return err
			}
			defer cl.Close()
			if watch {
				// kubectl get -w: the listing, then each change as it comes.
				if err := lf.forWatch(&fm); err != nil {
					return err
				}
				name := ""
				if len(args) == 2 {
					name = args[1]
				}
				return watchKind(cmd, cl, kind, fm, opts, watchWhat{name: name, keep: f.keep, decorate: lf.decorate, changesOnly: watchOnly})
			}
			objs, _, err := cl.List(ctxOf(cmd), kind, opts)
			if err != nil {
				return err
			}
			objs = f.keep(objs)
			if err := lf.apply(&fm, objs); err != nil {
				return err
			}
			l := objectListing(objs, f.all, false, time.Now())
			lf.decorate(&l, objs)
			l.none = plural(strings.ToLower(string(kind)))
			// A user reads the Namespaces where it has a role, as it lists
			// every namespace.
			l.scope = userScope(cl, opts.AllNamespaces && kind.Namespaced() || kind == legion.KindNamespace)
			if kind == legion.KindNamespace && (fm.name == "table" || fm.name == "wide") {
				l.none = "Namespace objects"
			}
			if err := l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm); err != nil {
				return err
			}
			if kind == legion.KindNamespace && len(l.rows) == len(objs) && (fm.name == "table" || fm.name == "wide") {
				sayNamespacesNeedNoObject(cmd.ErrOrStderr(), objs)
			}
			warnListed(cmd.ErrOrStderr(), objs, listWith(ctxOf(cmd), cl))
			return nil
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the listing, print every change as it happens, as legion watch does")
	cmd.Flags().BoolVar(&watchOnly, "watch-only", false, "print every change as it happens, without the listing first")
	lf.add(cmd)
	f.add(cmd, true)
	outputFlag(cmd, &output)
	return cmd
}

// sayNamespacesNeedNoObject tells a kubectl user, who expects every
// namespace listed and default among them, why some are not: a
// Namespace object holds a namespace's settings, and objects may live in
// a namespace that has none (default has none unless one is applied).
func sayNamespacesNeedNoObject(w io.Writer, listed []legion.Object) {
	for _, o := range listed {
		if o.GetMetadata().Name == "default" {
			return
		}
	}
	fmt.Fprintln(w, "A namespace needs a Namespace object only for a quota, isolation or an allow list: "+
		"objects live in default and in other namespaces without one all the same.")
}

func (c *clusterCLI) deleteCommand() *cobra.Command {
	var f scopeFlags
	var files []string
	var all, ignoreNotFound, dryRun bool
	cmd := &cobra.Command{
		Use:   "delete KIND NAME... | delete KIND/NAME... | delete KIND -l KEY=VALUE | delete KIND --all | delete -f FILE|DIR|-",
		Short: "Delete objects by name or label, or the objects of manifests",
		RunE: func(cmd *cobra.Command, args []string) error {
			var targets []legion.Object
			var err error
			switch {
			case all && (len(files) > 0 || f.selects() || len(args) != 1 || strings.Contains(args[0], "/")):
				return errors.New("--all deletes every object of one KIND in the namespace: give KIND alone, without names, -l or -f")
			case all:
				if targets, err = c.selected(cmd, args, f); err != nil {
					return err
				}
			case len(files) > 0 && len(args) == 0 && !f.selects():
				objs, err := readManifests(cmd.InOrStdin(), files, f.namespace)
				if err != nil {
					return err
				}
				// Workloads first, namespaces last: the reverse of apply.
				sortByKind(objs, true)
				targets = objs
			case len(files) > 0:
				return errors.New("-f takes no KIND, NAME or -l: the manifests say what to delete")
			case len(args) == 0:
				return errors.New("expected KIND NAME..., KIND/NAME..., KIND -l KEY=VALUE, or -f FILE")
			case f.selects():
				if targets, err = c.selected(cmd, args, f); err != nil {
					return err
				}
			default:
				if targets, err = named("delete", args, f.namespace); err != nil {
					return err
				}
			}
			targets = withoutOwnedTasks(targets)
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			del, suffix := cl.Delete, ""
			var checked []legion.Object // a dry run's deletes so far
			if dryRun {
				suffix = " (dry run)"
				del = func(ctx context.Context, kind legion.Kind, ns, name string, version *uint64) (legion.Object, error) {
					return cl.CheckDelete(ctx, kind, ns, name, version, checked)
				}
			}
			var errs []error
			for _, o := range targets {
				m := o.GetMetadata()
				gone, err := del(ctxOf(cmd), o.GetKind(), m.Namespace, m.Name, nil)
				if err == nil && dryRun && !stopsOnly(gone) {
					checked = append(checked, gone)
				}
				if ignoreNotFound && errors.Is(err, client.ErrNotFound) {
					continue // gone already: what was asked holds
				}
				if dryRun && client.Code(err) == codes.Unimplemented {
					return errors.Join(append(errs, fmt.Errorf("checking the delete of %s: the manager predates dry runs of deletes, so nothing was checked (and nothing deleted); upgrade the managers first", ref(o)))...)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("deleting %s: %w", ref(o), err))
					continue
				}
				fmt.Fprintln(cmd.OutOrStdout(), deletedLine(gone)+suffix)
				switch o.GetKind() {
				case legion.KindNamespace:
					warnNamespaceLeft(ctxOf(cmd), cmd.ErrOrStderr(), cl, m.Name)
				case legion.KindService:
					noteClaimsKept(ctxOf(cmd), cmd.ErrOrStderr(), cl, gone)
				}
			}
			return errors.Join(errs...)
		},
	}
	f.add(cmd, false)
	cmd.Flags().StringArrayVarP(&f.labels, "selector", "l", nil, "delete the objects of KIND "+strings.TrimPrefix(selectorUsage, "only objects "))
	cmd.Flags().StringArrayVar(&f.fields, "field-selector", nil, "delete the objects of KIND "+strings.TrimPrefix(fieldUsage, "only objects "))
	fileFlag(cmd, &files, "delete the objects of these manifests")
	cmd.Flags().BoolVar(&all, "all", false, "delete every object of KIND in the namespace")
	cmd.Flags().BoolVar(&ignoreNotFound, "ignore-not-found", false, "say nothing of objects not there, and exit 0 for them")
	cmd.Flags().Var((*dryRunFlag)(&dryRun), "dry-run", "say what would be deleted, delete nothing: the cluster checks each delete as it would make it (kubectl's --dry-run=server)")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "true"
	// kubectl's, hidden: what a delete here does anyway is taken, the
	// rest refused saying why.
	for name, f := range map[string]*kubectlFlag{
		"wait": {ok: func(v string) bool { return !isTrue(v) }, bool: true,
			why: "a delete here returns once the object is gone from the store, with nothing left to wait for; a Service's tasks stop after it (legion wait task/NAME --for delete follows one)"},
		"grace-period": {why: "a task stops within its containers' stopGracePeriod, set in its spec (spec.pod.containers[].stopGracePeriod), not per delete"},
		"force":        {bool: true, why: "a delete here is never forced: a task whose node is down is marked orphaned and replaced without it, and legion node rm removes a node that will not come back"},
		"now":          {bool: true, why: "a task stops within its containers' stopGracePeriod, set in its spec, not per delete"},
	} {
		flag := cmd.Flags().VarPF(f, name, "", "kubectl's")
		if f.bool {
			flag.NoOptDefVal = "true"
		}
		flag.Hidden = true
	}
	return cmd
}

// named reads KIND NAME... or KIND/NAME... (kubectl's forms) into the
// objects named, in namespace ns, for the command use (delete, get,
// describe).
func named(use string, args []string, ns string) ([]legion.Object, error) {
	var out []legion.Object
	add := func(kind legion.Kind, name string) {
		o, _ := legion.New(kind) // a kind resolveKind gave
		o.GetMetadata().Name, o.GetMetadata().Namespace = name, ns
		out = append(out, o)
	}
	if strings.Contains(args[0], "/") {
		for _, a := range args {
			kind, name, err := kindNameArg(a, "an object", legion.Kinds()...)
			if err != nil {
				return nil, err
			}
			if kind == "" {
				return nil, fmt.Errorf("%q: expected KIND/NAME, as the arguments before it", a)
			}
			add(kind, name)
		}
		return out, nil
	}
	if len(args) < 2 {
		forms := "KIND NAME... or KIND/NAME..."
		if use == "delete" {
			forms = "KIND NAME..., KIND/NAME..., or KIND -l KEY=VALUE"
		}
		return nil, fmt.Errorf("%s %s: expected %s", use, args[0], forms)
	}
	// KIND NAME..., or kubectl's svc,cfg NAME...: each kind's object of
	// each name.
	if slices.ContainsFunc(strings.Split(args[0], ","), func(w string) bool { return strings.EqualFold(w, "all") }) {
		return nil, fmt.Errorf("%s %s: all stands for every workload of a namespace, and is not named by NAME; give the kinds (svc,job NAME)", use, strings.Join(args, " "))
	}
	kinds, err := kindList(args[0])
	if err != nil {
		return nil, err
	}
	for _, n := range args[1:] {
		if strings.Contains(n, "/") {
			return nil, fmt.Errorf("%q: expected a name of kind %s", n, args[0])
		}
		for _, kind := range kinds {
			add(kind, n)
		}
	}
	return out, nil
}

// sortByKind puts objs in apply's order, legion.Kinds' (namespaces
// first, then what workloads refer to), or its reverse for deleting.
func sortByKind(objs []legion.Object, reverse bool) {
	order := legion.Kinds()
	slices.SortStableFunc(objs, func(a, b legion.Object) int {
		if reverse {
			a, b = b, a
		}
		return slices.Index(order, a.GetKind()) - slices.Index(order, b.GetKind())
	})
}

// deletedLine is what delete says of what it deleted. A task a node runs
// is stopped, not removed (the server's stopTask): one told to stop
// before, its owner gone or an update replacing it, says why.
func deletedLine(gone legion.Object) string {
	if n, ok := gone.(*legion.Node); ok && n.Spec.Role == legion.RoleManager {
		return ref(gone) + " deleted: its certificates are refused, but it held the cluster's CA key and could still sign itself one under another name; legion ca rotate takes that away"
	}
	if !stopsOnly(gone) {
		return ref(gone) + " deleted"
	}
	t := gone.(*legion.Task)
	if why := t.Spec.StopReason; why != "" && why != taskDeleted {
		return ref(gone) + " stopping already (" + why + ")"
	}
	return ref(gone) + " stopping: its slot's next task starts once it has stopped, and it stays in the slot's history (delete it again then to remove it)"
}

// stopsOnly reports whether a delete left o in place, told to stop: a
// task that has not ended, which stays until it has.
func stopsOnly(o legion.Object) bool {
	t, ok := o.(*legion.Task)
	return ok && t.Spec.DesiredState == legion.TaskShutdown && !t.Status.State.Terminal()
}

// taskDeleted is the stop reason the manager gives a task a delete stops
// (the server's stopTask).
const taskDeleted = "deleted"

// withoutOwnedTasks leaves out of a delete the tasks of the services and
// jobs it deletes too (delete all): they stop with their owner, and
// deleting each would say that its slot's next task starts.
func withoutOwnedTasks(targets []legion.Object) []legion.Object {
	owners := map[legion.Owner]bool{}
	for _, o := range targets {
		if k := o.GetKind(); k == legion.KindService || k == legion.KindJob {
			owners[legion.Owner{Kind: k, Name: o.GetMetadata().Namespace + "/" + o.GetMetadata().Name}] = true
		}
	}
	return slices.DeleteFunc(targets, func(o legion.Object) bool {
		t, ok := o.(*legion.Task)
		return ok && owners[legion.Owner{Kind: t.Spec.Owner.Kind, Name: t.Metadata.Namespace + "/" + t.Spec.Owner.Name}]
	})
}

// selected is the objects of delete's KIND with -l's labels (every one
// without -l: --all), in -n's namespace (a name beside a selector is
// refused, as with get).
func (c *clusterCLI) selected(cmd *cobra.Command, args []string, f scopeFlags) ([]legion.Object, error) {
	if len(args) != 1 || strings.Contains(args[0], "/") {
		return nil, fmt.Errorf("delete %s -l: a name and a selector do not go together: give KIND alone, or names without -l or --field-selector", strings.Join(args, " "))
	}
	kinds, err := kindList(args[0])
	if err != nil {
		return nil, err
	}
	opts, err := f.options()
	if err != nil {
		return nil, err
	}
	if err := checkFieldTerms(f.terms, kinds...); err != nil {
		return nil, err
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var objs []legion.Object
	for _, kind := range kinds {
		listed, _, err := cl.List(ctxOf(cmd), kind, opts)
		if err != nil {
			return nil, err
		}
		objs = append(objs, f.keep(listed)...)
	}
	if len(objs) == 0 {
		with := ""
		if sel := slices.Concat(f.labels, f.fields); len(sel) > 0 {
			with = " with " + strings.Join(sel, ",")
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "No %s%s found.\n", kindWordsOr(kinds), with)
	}
	return objs, nil
}

// noteClaimsKept says which Volumes a deleted Service's claims made are
// kept, data and all, as a StatefulSet's PersistentVolumeClaims are: a
// user who deleted it to start afresh, or to free the space, learns they
// are there; applying it again takes each ordinal's back.
func noteClaimsKept(ctx context.Context, w io.Writer, cl *client.Client, gone legion.Object) {
	m := gone.GetMetadata()
	vols, _, err := cl.List(ctx, legion.KindVolume, client.ListOptions{Namespace: m.Namespace, Labels: map[string]string{scheduler.LabelService: m.Name}})
	if err != nil || len(vols) == 0 {
		return
	}
	names := make([]string, len(vols))
	for i, v := range vols {
		names[i] = v.GetMetadata().Name
	}
	fmt.Fprintf(w, "note: %s's volumes are kept, with their data: %s (applying the service again gives each ordinal its own back; legion delete volume NAME -n %s removes one and its data)\n",
		ref(gone), strings.Join(names, ", "), m.Namespace)
}

// warnNamespaceLeft says so when a deleted Namespace still holds objects:
// a Namespace object holds settings, not its objects, which run on
// without its quota, security allow-list and isolation, where a kubectl
// user would expect them gone.
func warnNamespaceLeft(ctx context.Context, w io.Writer, cl *client.Client, ns string) {
	left, err := namespaceHolds(ns, func(k legion.Kind) ([]legion.Object, error) {
		objs, _, err := cl.List(ctx, k, client.ListOptions{Namespace: ns})
		return objs, err
	})
	switch {
	case err != nil:
		fmt.Fprintf(w, "warning: what namespace %s still holds is not known: %v\n", ns, err)
	case left != "":
		fmt.Fprintf(w, "warning: namespace/%s still holds %s: they are kept, and run on without the namespace's quota, security allow-list and isolation; delete them with legion delete -n %s KIND NAME\n", ns, left, ns)
	}
}

func (c *clusterCLI) watchCommand() *cobra.Command {
	var f scopeFlags
	var output string
	cmd := &cobra.Command{
		Use:   "watch KIND",
		Short: "List a kind, then print every change to it as it happens",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, fm, opts, cl, err := c.query(cmd, args[0], output, &f)
			if err != nil {
				return err
			}
			defer cl.Close()
			return watchKind(cmd, cl, kind, fm, opts, watchWhat{keep: f.keep})
		},
	}
	f.add(cmd, true)
	outputFlag(cmd, &output)
	return cmd
}

// watchWhat is what a watch prints of the changes to a kind: those of
// the object named (all when empty) that keep keeps, with the columns
// decorate adds (nil: none), and with changesOnly not the first listing.
type watchWhat struct {
	name        string
	keep        func([]legion.Object) []legion.Object
	decorate    func(*listing, []legion.Object)
	changesOnly bool
}

// watchKind lists a kind, then prints every change to it (of the object
// named name alone, when given), as legion watch and get -w do.
func watchKind(cmd *cobra.Command, cl *client.Client, kind legion.Kind, fm format, opts client.ListOptions, w watchWhat) error {
	changesOnly, listed := w.changesOnly, false
	p := &watchPrinter{w: cmd.OutOrStdout(), f: fm, withNamespace: opts.AllNamespaces, now: time.Now, decorate: w.decorate}
	named := func(objs []legion.Object) []legion.Object {
		objs = w.keep(slices.Clone(objs))
		if w.name == "" {
			return objs
		}
		return slices.DeleteFunc(objs, func(o legion.Object) bool { return o.GetMetadata().Name != w.name })
	}
	return cl.ListWatch(ctxOf(cmd), kind, opts, func(u client.Update) error {
		if u.Listed {
			// A listing, first or after the watch was reset, shows
			// what is there now as added; with changesOnly, not the
			// first.
			if changesOnly && !listed {
				listed = true
				return nil
			}
			return p.print(client.Added, named(u.Objects))
		}
		if objs := named([]legion.Object{u.Event.Object}); len(objs) > 0 {
			return p.print(u.Event.Type, objs)
		}
		return nil
	})
}

func (c *clusterCLI) diffCommand() *cobra.Command {
	var files []string
	var ns string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR|URL|-",
		Short: "Show what apply would change: a unified diff of labels and normalised spec",
		Long: `Diff asks the cluster for a dry-run apply of the manifests and prints, for each
object that would change, a unified diff of its labels and spec as stored
and as it would be stored (after admission's defaults). A Secret's value is
never printed: it shows as its size and whether it would change. It exits 1
when anything would change, 0 when nothing would.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, res, cl, err := c.applyFile(cmd, "diff", files, ns, client.ApplyOptions{DryRun: true}, nil)
			if err != nil {
				return err
			}
			cl.Close()
			changed := false
			for _, r := range res {
				if r.Outcome == client.Unchanged {
					continue
				}
				changed = true
				before, after, err := diffViews(r.Previous, r.Object)
				if err != nil {
					return err
				}
				name := legion.ObjectKey(r.Object)
				fmt.Fprint(cmd.OutOrStdout(), unifiedDiff("live/"+name, "applied/"+name, string(before), string(after)))
			}
			if changed {
				return &exitError{code: 1}
			}
			return nil
		},
	}
	fileFlag(cmd, &files, "the manifests to compare")
	manifestNamespaceFlag(cmd, &ns)
	return cmd
}
