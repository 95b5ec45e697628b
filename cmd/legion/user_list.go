package main

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// userView is one user of user ls: the roles its RoleBindings give it.
type userView struct {
	Name  string     `json:"name"`
	Roles []userRole `json:"roles"`
}

// userRole is one RoleBinding of a user.
type userRole struct {
	Namespace string      `json:"namespace"`
	Role      legion.Role `json:"role"`
	Binding   string      `json:"binding"`
}

// userListing groups RoleBindings by the user they name, users in name
// order, each one's roles by namespace.
func userListing(bindings []legion.Object) listing {
	by := map[string][]userRole{}
	for _, o := range bindings {
		b := o.(*legion.RoleBinding)
		by[b.Spec.User] = append(by[b.Spec.User], userRole{Namespace: b.Metadata.Namespace, Role: b.Spec.Role, Binding: b.Metadata.Name})
	}
	l := listing{columns: cols("USER", "ROLES", "+ROLEBINDINGS"), none: "users with a RoleBinding"}
	for _, name := range slices.Sorted(maps.Keys(by)) {
		roles := by[name]
		slices.SortFunc(roles, func(a, b userRole) int {
			return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Binding, b.Binding))
		})
		var said, refs []string
		for _, r := range roles {
			said = append(said, string(r.Role)+" in "+r.Namespace)
			refs = append(refs, r.Namespace+"/"+r.Binding)
		}
		l.add("user/"+name, userView{Name: name, Roles: roles}, name, strings.Join(said, ", "), strings.Join(refs, ", "))
	}
	return l
}

// userListCommand is `legion user ls`: who may do what, by user.
func (c *clusterCLI) userListCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the users that RoleBindings give rights, with their roles in each namespace",
		Long: `ls lists each user that a RoleBinding names, with its role in each namespace,
from the RoleBindings of every namespace (a namespace user sees those of
its own namespaces, and is told so).
The cluster keeps no list of the users it signed certificates for: a user
without a RoleBinding holds no right and is not listed, as after legion
user revoke.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			bindings, _, err := cl.List(ctxOf(cmd), legion.KindRoleBinding, client.ListOptions{AllNamespaces: true})
			if err != nil {
				return err
			}
			l := userListing(bindings)
			if l.scope = userScope(cl, true); l.scope != "" && len(l.rows) > 0 {
				// A namespace user reads the RoleBindings of its own
				// namespaces only: what it sees is part of the rights.
				fmt.Fprintf(cmd.ErrOrStderr(), "note: from the RoleBindings%s; the cluster admin sees every namespace's\n", l.scope)
			}
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		},
	}
	outputFlag(cmd, &output)
	return cmd
}
