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
	"github.com/spf13/cobra"
)

// clusterCLI holds what the cluster commands share: where the manager is
// and as whom to call it, read from flags, the environment and the
// settings file's context (settings in context_cmds.go).
type clusterCLI struct{}

// addClusterCommands adds the commands that talk to a cluster (daemon,
// init, join, apply, get, ...). It also puts --server and --credentials
// on the root, so every command reaching a cluster shares them.
func addClusterCommands(root *cobra.Command) {
	cli := newClusterCLI()
	pf := root.PersistentFlags()
	pf.String("server", client.DefaultServer, "address of a manager (env LEGION_SERVER)")
	pf.String("credentials", "", "PEM bundle of certificate, key and CA, such as a manager's admin.pem (env LEGION_CREDENTIALS)")
	pf.Duration("request-timeout", 0, fmt.Sprintf("how long a call waits for the cluster: through an election, or for a manager that does not answer yet (default: %s through elections, %s when nothing answers at --server)", client.DefaultRetry, client.DialRetry))
	root.AddCommand(
		newDaemonCommand(),
		cli.initCommand(), cli.joinCommand(), cli.statusCommand(), cli.tokenCommand(),
		cli.applyCommand(), cli.getCommand("get"), cli.getCommand("list"), cli.deleteCommand(), cli.editCommand(),
		cli.watchCommand(), cli.diffCommand(), cli.userCommand(), cli.createCommand(), cli.setCommand(), cli.autoscaleCommand(), cli.labelCommand(), cli.waitCommand(),
	)
}

func newClusterCLI() *clusterCLI { return &clusterCLI{} }

// server is the manager address in effect: the flag if given, else
// LEGION_SERVER, else the current context's, else the default.
func (c *clusterCLI) server(cmd *cobra.Command) string {
	return serverSetting(cmd)
}

// connect makes a client with the credentials in effect (the flag, else
// LEGION_CREDENTIALS, else the current context's).
func (c *clusterCLI) connect(cmd *cobra.Command) (*client.Client, error) {
	creds := credentialsSetting(cmd)
	if creds == "" {
		return nil, errors.New("no credentials: pass --credentials, set LEGION_CREDENTIALS or choose a context (legion context ls; legion init prints where admin.pem is)")
	}
	retry, err := requestTimeoutSetting(cmd)
	if err != nil {
		return nil, err
	}
	return client.New(client.Options{Server: c.server(cmd), CredentialsFile: creds, Retry: retry})
}

// requestTimeout is the request timeout in effect (the flag, else
// LEGION_REQUEST_TIMEOUT, else the context's), else zero (the client's
// defaults); one that does not parse is said by connect.
func requestTimeout(cmd *cobra.Command) time.Duration {
	d, _ := requestTimeoutSetting(cmd)
	return d
}

// bare makes a client without credentials: init, join and status on a
// fresh daemon of this host.
func (c *clusterCLI) bare(cmd *cobra.Command, server string) (*client.Client, error) {
	return client.New(client.Options{Server: server, Retry: requestTimeout(cmd)})
}

func ctxOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}

func (c *clusterCLI) initCommand() *cobra.Command {
	var podCIDR, serviceCIDR string
	var ca caFiles
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Make the daemon reached (a fresh one on this host) the first manager of a new cluster",
		Long: `Init makes the fresh daemon of this host the first manager of a new
cluster, with a new root CA, or, with --ca-cert and --ca-key, with a CA
of your own PKI as the cluster's root: a CA certificate valid now and
its unencrypted ECDSA key (P-256, P-384 or P-521). An intermediate CA is
taken too: the cluster trusts it, not the CAs above it. The key goes to
the daemon over its TLS port on this host and is kept as a CA key init
makes is: in pki/ca.key of every manager, sealed under autolock.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRangeFlags(podCIDR, serviceCIDR); err != nil {
				return err
			}
			caCert, caKey, err := ca.read(time.Now())
			if err != nil {
				return fmt.Errorf("init: %w", err)
			}
			cl, err := c.bare(cmd, c.server(cmd))
			if err != nil {
				return err
			}
			defer cl.Close()
			resp, err := cl.InitWith(ctxOf(cmd), client.InitOptions{PodCIDR: podCIDR, ServiceCIDR: serviceCIDR, CACert: caCert, CAKey: caKey})
			if err != nil {
				return fmt.Errorf("init: %w", err)
			}
			if caCert != nil {
				if err := ca.checkTaken(cmd.ErrOrStderr(), caCert, resp.AdminCredentials); err != nil {
					return fmt.Errorf("init: %w", err)
				}
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "Initialised a new cluster; this manager is node %s.\n", resp.NodeID)
			fmt.Fprintf(out, "Cluster ranges: pods %s, services %s.\n", resp.PodCIDR, resp.ServiceCIDR)
			fmt.Fprintf(out, "Admin credentials: %s\n", resp.AdminCredentials)
			fmt.Fprintf(out, "  export LEGION_CREDENTIALS=%s\n", resp.AdminCredentials)
			if line, err := rememberCluster(cmd, clusterDirOf(resp.AdminCredentials), c.server(cmd), resp.AdminCredentials); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: no context for this cluster: %v\n", err)
			} else if line != "" {
				fmt.Fprintln(out, line)
			}
			fmt.Fprintln(out, "Join tokens: legion token show worker|manager")
			return nil
		},
	}
	rangeFlags(cmd.Flags(), &podCIDR, &serviceCIDR)
	ca.addFlags(cmd.Flags(), "for the cluster's root")
	return cmd
}

func (c *clusterCLI) joinCommand() *cobra.Command {
	var daemon, role string
	cmd := &cobra.Command{
		Use:   "join TOKEN [--server MANAGER]",
		Short: "Make the fresh daemon of this host join a cluster with a join token",
		Long: `Join asks the fresh daemon of this host (--daemon) to join the cluster of the
manager at --server (or LEGION_SERVER). The daemon checks the manager's CA
against the token's digest before it sends anything, then gets its
certificate; a manager token makes it a manager, a worker token a worker.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			server := c.server(cmd)
			if len(args) == 2 {
				server = args[1]
			}
			if !cmd.Flags().Changed("daemon") {
				if err := checkJoinDaemon(ctxOf(cmd), daemon); err != nil {
					return err
				}
			}
			cl, err := c.bare(cmd, daemon)
			if err != nil {
				return err
			}
			defer cl.Close()
			resp, err := cl.JoinCluster(ctxOf(cmd), args[0], server, role)
			if err != nil {
				return fmt.Errorf("join: %w", err)
			}
			confirm(cmd.OutOrStdout(), string(legion.KindNode), resp.NodeID, "joined", "(as a "+resp.Role+")")
			return nil
		},
	}
	cmd.Flags().StringVar(&daemon, "daemon", joinDefaultDaemon, "address of this host's fresh daemon")
	cmd.Flags().StringVar(&role, "role", "", "manager or worker (default: the token's)")
	return cmd
}

func (c *clusterCLI) statusCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:        "status",
		SuggestFor: []string{"cluster-info", "info"}, // kubectl cluster-info, docker info
		Short:      "Show the manager reached and its cluster",
		Args:       cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			cl, err := c.connect(cmd)
			if err != nil {
				// A fresh daemon of this host answers without credentials.
				if cl, err = c.bare(cmd, c.server(cmd)); err != nil {
					return err
				}
			}
			defer cl.Close()
			st, err := cl.Status(ctxOf(cmd))
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			out := cmd.OutOrStdout()
			if fm.name != "table" && fm.name != "wide" {
				l := statusListing(st)
				return l.print(out, cmd.ErrOrStderr(), fm)
			}
			printStatus(out, st)
			return nil
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

// printStatus writes legion status's table: the node, and for a manager
// the cluster as its Raft sees it (or that it was removed).
func printStatus(out io.Writer, st client.Status) {
	if !st.Initialized {
		fmt.Fprintf(out, "Node %s belongs to no cluster: run legion init, or legion join.\n", st.NodeID)
		return
	}
	fmt.Fprintf(out, "Node:      %s (%s)\n", st.NodeID, st.Role)
	if st.Removed {
		// Its Raft's candidacy and missing leader are its own.
		fmt.Fprintln(out, removedManager)
		return
	}
	if st.State != "" {
		fmt.Fprintf(out, "State:     %s, term %d\n", st.State, st.Term)
		if st.LeaderID != "" {
			fmt.Fprintf(out, "Leader:    %s at %s\n", st.LeaderID, orNone(st.LeaderAddress))
		} else {
			fmt.Fprintf(out, "Leader:    none: %s\n", noLeaderWhy(st.Members))
			if frozen(st.Members) {
				fmt.Fprintf(out, "Recovery:  %s\n", frozenRecovery)
			}
		}
		fmt.Fprintf(out, "Indexes:   applied %d, committed %d\n", st.AppliedIndex, st.CommitIndex)
		if ft := faultTolerance(st.Members); ft != "" {
			fmt.Fprintf(out, "Tolerates: %s\n", ft)
		}
		fmt.Fprintln(out, "Managers:")
		printManagers(out, st.Members)
	}
}

// removedManager is legion status of a manager taken out of the cluster.
const removedManager = `Removed:   this manager was taken out of the cluster (its node deleted): it serves
           nothing but this status, and its own Raft state is not the cluster's.
           Ask another manager for the cluster's status. To bring this host back,
           stop its daemon, move its data directory aside and join again (legion join).`

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func (c *clusterCLI) tokenCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Show or rotate the join tokens"}
	for _, verb := range []string{"show", "rotate"} {
		cmd.AddCommand(&cobra.Command{
			Use:       verb + " worker|manager",
			Short:     strings.ToUpper(verb[:1]) + verb[1:] + " the join token of workers or managers",
			Args:      cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
			ValidArgs: []string{"worker", "manager"},
			RunE: func(cmd *cobra.Command, args []string) error {
				cl, err := c.connect(cmd)
				if err != nil {
					return err
				}
				defer cl.Close()
				var tok string
				if verb == "show" {
					tok, err = cl.Token(ctxOf(cmd), args[0])
				} else {
					tok, err = cl.RotateToken(ctxOf(cmd), args[0])
				}
				if err != nil {
					return fmt.Errorf("token %s: %w", verb, err)
				}
				fmt.Fprintln(cmd.OutOrStdout(), tok)
				return nil
			},
		})
	}
	return cmd
}

// resolveKind reads kubectl-style kind names: the kind in any case, its
// plural, or a short name.
func resolveKind(s string) (legion.Kind, error) {
	l := strings.ToLower(s)
	short := map[string]legion.Kind{
		"ns": legion.KindNamespace, "no": legion.KindNode, "svc": legion.KindService, "cj": legion.KindCronJob,
		"netpol": legion.KindNetworkPolicy, "np": legion.KindNetworkPolicy, "rb": legion.KindRoleBinding,
		"vol": legion.KindVolume, "cfg": legion.KindConfig,
	}
	if k, ok := short[l]; ok {
		return k, nil
	}
	for _, k := range legion.Kinds() {
		name := strings.ToLower(string(k))
		if l == name || l == plural(name) {
			return k, nil
		}
	}
	hint := ""
	if k, how, ok := legion.KubernetesKind(l); ok {
		hint = "; " + how + ": legion get " + plural(strings.ToLower(string(k)))
	}
	switch l {
	case "event", "events", "ev":
		hint = "; events are not objects here: legion events (-n NAMESPACE, -f to follow)"
	case "endpoints", "ep", "endpointslice", "endpointslices":
		hint = "; a Service's endpoints are its ready tasks here: legion describe service NAME, or legion tasks NAME -o wide (their addresses)"
	}
	return "", fmt.Errorf("unknown kind %q: expected one of %s%s", s, kindWords(), hint)
}

// kindWords is the kinds resolveKind reads, for messages.
func kindWords() string {
	var names []string
	for _, k := range legion.Kinds() {
		names = append(names, plural(strings.ToLower(string(k))))
	}
	slices.Sort(names)
	return strings.Join(names, ", ") + " (singular or plural, any case), or a short name (svc, ns, no, cj, np, rb, vol, cfg)"
}

// plural is a kind's plural as typed here, in lower case.
func plural(s string) string { return legion.Kind(s).Plural() }
