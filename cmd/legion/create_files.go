package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// createFilesFlags are legion create's own, for kubectl create -f.
type createFilesFlags struct {
	files  []string
	ns     string
	sel    scopeFlags
	dryRun bool
	out    appliedOutput
}

func (f *createFilesFlags) add(cmd *cobra.Command) {
	fileFlag(cmd, &f.files, "make the objects of these manifests, none of which may be there already (legion apply -f makes or changes them)")
	manifestNamespaceFlag(cmd, &f.ns)
	cmd.Flags().StringArrayVarP(&f.sel.labels, "selector", "l", nil, "make only the manifests' objects with these labels (kubectl's selectors: k=v, k!=v, k in (a,b), k, !k)")
	cmd.Flags().Var((*dryRunFlag)(&f.dryRun), "dry-run", "say what would be made, write nothing: the cluster checks the objects as for a create (kubectl's --dry-run=server)")
	cmd.Flags().Lookup("dry-run").NoOptDefVal = "true"
	f.out.add(cmd)
	// kubectl's, hidden: --save-config keeps what a later client-side
	// apply needs, which an apply here (server-side) does not.
	for name, k := range map[string]*kubectlFlag{
		"save-config": {ok: always, bool: true},
		"edit":        {bool: true, why: "make the objects, then legion edit KIND NAME changes one in an editor"},
	} {
		flag := cmd.Flags().VarPF(k, name, "", "kubectl's")
		flag.NoOptDefVal, flag.Hidden = "true", true
	}
}

// createFiles is kubectl create -f: it makes the manifests' objects and
// refuses each one whose kind and name is there already, as create never
// replaces (apply does). As kubectl, each object is made on its own, in
// apply's order (namespaces first, then what workloads refer to): one
// refused leaves the others made, and the command fails naming it.
func (c *clusterCLI) createFiles(cmd *cobra.Command, f *createFilesFlags) error {
	if _, err := f.sel.options(); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	if err := f.out.check("create"); err != nil {
		return err
	}
	objs, err := manifestObjects(cmd, "create", f.files, f.ns, &f.sel)
	if err != nil {
		return err
	}
	sortByKind(objs, false)
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	suffix := ""
	if f.dryRun {
		suffix = " (dry run)"
	}
	var made, stored []legion.Object
	var errs []error
	for _, o := range objs {
		res, err := createNew(ctxOf(cmd), cl, o, client.ApplyOptions{DryRun: f.dryRun, Brief: f.out.brief()})
		switch {
		case errors.Is(err, client.ErrAborted):
			m := o.GetMetadata()
			show := strings.ToLower(string(o.GetKind())) + " " + m.Name
			if o.GetKind().Namespaced() && m.Namespace != legion.DefaultNamespace {
				show += " -n " + m.Namespace
			}
			errs = append(errs, fmt.Errorf("%s exists, and create replaces nothing: legion apply -f changes it (legion get %s -o yaml shows it)", ref(o), show))
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("creating %s: %w", ref(o), err))
			continue
		}
		made, stored = append(made, o), append(stored, res.Object)
		if f.out.output == "" {
			fmt.Fprintf(cmd.OutOrStdout(), "%s created%s\n", ref(res.Object), suffix)
		}
	}
	if f.out.output != "" && len(stored) > 0 {
		if err := f.out.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), stored); err != nil {
			return err
		}
	}
	if !f.dryRun && len(made) > 0 {
		// Stored, but not all as the manifests say: said beside.
		warnApplied(cmd.ErrOrStderr(), made, listWith(ctxOf(cmd), cl))
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("create: %w", errs[0])
	}
	lines := make([]string, len(errs))
	for i, err := range errs {
		lines[i] = "  " + err.Error()
	}
	return fmt.Errorf("create: %d of the %d objects were not made:\n%s", len(errs), len(objs), strings.Join(lines, "\n"))
}
