package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// addCACommands adds legion ca rotate and legion ca status.
func addCACommands(root *cobra.Command) {
	root.AddCommand(newClusterCLI().caCommand())
}

func (c *clusterCLI) caCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "ca", Short: "Rotate the cluster's root CA, or see a rotation under way (cluster admin only)"}
	var ca caFiles
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Replace the cluster's root CA with a new one, without downtime",
		Long: `Rotate makes a new root CA. Managers issue certificates under it at once
and trust both CAs meanwhile; every node renews its certificate under the
new one by itself (managers within seconds, workers at their next renewal
check), and once all have, certificates of the old CA are refused.

With --ca-cert and --ca-key the new CA is one of your own PKI, checked as
legion init checks it (an intermediate CA is taken as the cluster's
root); its key goes to the manager over the admin's mutual TLS
connection, and from there to every manager, as the CA key always does.

The admin credentials (admin.pem) on the managers that hold them are
renewed under the new CA. Other users' credentials are not: issue them
again with legion user create (-o to a new file) before the rotation
ends. Join tokens change with the CA: show them again with legion token.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			caCert, caKey, err := ca.read(time.Now())
			if err != nil {
				return fmt.Errorf("ca rotate: %w", err)
			}
			if caCert != nil {
				return c.caRotateTo(cmd, caCert, caKey)
			}
			return c.caCall(cmd, false)
		},
	}
	ca.addFlags(rotate.Flags(), "to rotate to")
	var output string
	st := &cobra.Command{
		Use:   "status",
		Short: "Show the CA certificates are issued under and the nodes not yet renewed under it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			if fm.name == "table" || fm.name == "wide" {
				return c.caCall(cmd, true)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			r, err := cl.RotateCA(ctxOf(cmd), true)
			if err != nil {
				return fmt.Errorf("ca status: %w", err)
			}
			l := caListing(r)
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		},
	}
	outputFlag(st, &output)
	cmd.AddCommand(rotate, st)
	return cmd
}

func (c *clusterCLI) caCall(cmd *cobra.Command, statusOnly bool) error {
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.RotateCA(ctxOf(cmd), statusOnly)
	if err != nil {
		if statusOnly {
			return fmt.Errorf("ca status: %w", err)
		}
		return fmt.Errorf("ca rotate: %w", err)
	}
	printRotation(cmd.OutOrStdout(), r)
	return nil
}

// caRotateTo rotates to the CA given.
func (c *clusterCLI) caRotateTo(cmd *cobra.Command, certPEM, keyPEM []byte) error {
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	r, err := cl.RotateCATo(ctxOf(cmd), certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("ca rotate: %w", err)
	}
	printRotation(cmd.OutOrStdout(), r)
	return nil
}

func printRotation(w io.Writer, r client.CARotation) {
	if r.Started {
		fmt.Fprintln(w, "CA rotation started: nodes renew under the new CA by themselves.")
		fmt.Fprintln(w, "Users other than the cluster admin must be issued new credentials (legion user create).")
	}
	fmt.Fprintf(w, "CA:          %s\n", r.Digest)
	if r.PreviousDigest == "" {
		fmt.Fprintln(w, "Rotation:    none under way")
		return
	}
	fmt.Fprintf(w, "Previous CA: %s (trusted until every node renewed)\n", r.PreviousDigest)
	if len(r.Pending) == 0 {
		// The leader ends the rotation at its next check.
		fmt.Fprintln(w, "Pending:     none: every node renewed, and the rotation ends within seconds (a check of the leader's)")
		return
	}
	fmt.Fprintf(w, "Pending:     %d node(s): %s\n", len(r.Pending), strings.Join(r.Pending, ", "))
}
