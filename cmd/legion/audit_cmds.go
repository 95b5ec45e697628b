package main

import (
	"fmt"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// addAuditCommands adds legion audit.
func addAuditCommands(root *cobra.Command) {
	root.AddCommand(newClusterCLI().auditCommand())
}

func (c *clusterCLI) auditCommand() *cobra.Command {
	var f client.AuditFilter
	var since, output string
	cmd := &cobra.Command{
		Use:   "audit [--since WHEN] [--actor NAME] [--action ACTION] [-n NAMESPACE] [--kind KIND] [--denied]",
		Short: "List who changed what, who opened sessions and what was refused (cluster admin only)",
		Long: `List the cluster's audit events, oldest first: every change (apply,
delete, init, joins, join tokens, users issued, autolock, volume backups
and restores), every session opened (logs, exec, port-forward) and every
request refused for rights, with who asked, the object, how it ended and
which manager decided. Events name objects and never hold their values.
The leader keeps them for --audit-retention-days and at most
--audit-max-events (legion daemon flags).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			if since != "" {
				t, err := parseSince(since, time.Now())
				if err != nil {
					return err
				}
				f.Since = t
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			events, err := cl.Audit(ctxOf(cmd), f)
			if err != nil {
				return err
			}
			l := auditListing(events)
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&since, "since", "", "only events at or after WHEN: a duration back from now (1h) or a time (RFC 3339)")
	fl.StringVar(&f.Actor, "actor", "", "only events of this user or node (as its certificate names it)")
	fl.StringVar(&f.Action, "action", "", "only this action (apply, delete, exec, join, ...)")
	fl.StringVarP(&f.Namespace, "namespace", "n", "", "only objects of this namespace")
	fl.StringVar(&f.Kind, "kind", "", "only objects of this kind")
	fl.BoolVar(&f.Denied, "denied", false, "only requests refused for rights")
	outputFlag(cmd, &output)
	return cmd
}

// parseSince reads --since: a duration back from now or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("--since %s: expected a positive duration", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("--since %q: expected a duration (1h30m) or a time (2026-03-01T12:00:00Z)", s)
	}
	return t, nil
}

func actorOf(e client.AuditEvent) string {
	switch {
	case e.Actor == "":
		return "(no certificate)"
	case e.Role != "":
		return e.Role + ":" + e.Actor
	}
	return e.Actor
}

func objectOf(e client.AuditEvent) string {
	name := e.Name
	if e.Namespace != "" {
		name = e.Namespace + "/" + name
	}
	if e.Kind == "" {
		return orDash(name)
	}
	return e.Kind + " " + name
}
