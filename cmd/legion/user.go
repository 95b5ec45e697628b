package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/spf13/cobra"
)

// userCommand is `legion user create`: a user's credentials, made here
// (the key never leaves this machine), and optionally its first role.
func (c *clusterCLI) userCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "Make credentials for users, who act only where RoleBindings let them; list and revoke their rights"}
	var role, namespace, out string
	create := &cobra.Command{
		Use:   "create NAME [--role view|edit|admin -n NAMESPACE] [-o FILE]",
		Short: "Write a user's credentials (cluster admin only), and give it a role in a namespace",
		Long: `Create makes a key and a certificate request here, has the cluster sign
it as a user's (who holds no right of its own), and writes the bundle of
certificate, key and CA to FILE (NAME.pem by default, mode 0600), for
--credentials. With --role it also applies a RoleBinding NAME in the
namespace: view reads all but Secrets, edit also reads Secrets and applies
and deletes, admin also manages the namespace's RoleBindings.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if out == "" {
				out = name + ".pem"
			}
			if _, err := os.Stat(out); err == nil {
				return fmt.Errorf("%s exists: choose another with -o", out)
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			var binding legion.Object
			if role != "" {
				b, _ := legion.New(legion.KindRoleBinding)
				b.GetMetadata().Name, b.GetMetadata().Namespace = name, namespace
				b.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: name, Role: legion.Role(role)}
				if err := legion.Admit(b); err != nil {
					return err
				}
				binding = b
			}
			key, err := pki.NewKey()
			if err != nil {
				return err
			}
			csr, err := pki.CSR(key, name)
			if err != nil {
				return err
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			cert, ca, err := cl.IssueUser(ctxOf(cmd), name, csr)
			if err != nil {
				return fmt.Errorf("user create %s: %w", name, err)
			}
			keyPEM, err := pki.KeyPEM(key)
			if err != nil {
				return err
			}
			if err := pki.WriteFile(out, pki.Bundle(cert, keyPEM, ca)); err != nil {
				return err
			}
			confirm(cmd.OutOrStdout(), "user", name, "created", "(credentials in "+out+")")
			if binding != nil {
				res, err := cl.Apply(ctxOf(cmd), []legion.Object{binding}, client.ApplyOptions{Brief: true})
				if err != nil {
					return fmt.Errorf("user create %s: the credentials are written, the role is not: %w", name, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s (%s in namespace %s)\n", ref(res[0].Object), res[0].Outcome, role, namespace)
			}
			return nil
		},
	}
	create.Flags().StringVar(&role, "role", "", "view, edit or admin in the namespace (none: bind it later with a RoleBinding)")
	create.Flags().StringVarP(&namespace, "namespace", "n", legion.DefaultNamespace, "namespace of the role")
	create.Flags().StringVarP(&out, "output", "o", "", "file to write the credentials to (default NAME.pem)")
	cmd.AddCommand(create, c.userRevokeCommand(), c.userListCommand())
	return cmd
}

// userRevokeCommand is `legion user revoke NAME`: every RoleBinding of
// the user goes in one request.
func (c *clusterCLI) userRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke NAME",
		Short: "Remove every RoleBinding of a user, in every namespace (cluster admin only)",
		Long: `Revoke removes all of a user's RoleBindings in one request. The user's
next request is refused, and its open watches and sessions (logs, exec,
port-forward) end within seconds, saying why. Its certificate stays valid
until it expires but gives no right: binding the user again restores them.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			removed, err := cl.RevokeUser(ctxOf(cmd), args[0])
			if err != nil {
				return fmt.Errorf("user revoke %s: %w", args[0], err)
			}
			confirm(cmd.OutOrStdout(), "user", args[0], "revoked", "(RoleBindings removed: "+strings.Join(removed, ", ")+")")
			return nil
		},
	}
}
