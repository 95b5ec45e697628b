package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

// newPortForwardCommand is `legion port-forward`: connections to a local
// port reach a port of a task's pod, through any manager and the agent of
// the pod's node.
func newPortForwardCommand() *cobra.Command {
	cli := newClusterCLI()
	var namespace, address string
	cmd := &cobra.Command{
		Use:   "port-forward TASK|SERVICE|JOB [LOCAL:]PORT",
		Short: "Forward a local port to a port of a task's pod",
		Long: `Port-forward listens on a local port (PORT itself unless LOCAL is given;
0 picks a free one) and carries each connection to PORT of the task's pod
(a service or job name picks one of its running tasks), until interrupted.
Nothing needs to be published: the agent of the pod's node connects.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			local, remote, err := parsePorts(args[1])
			if err != nil {
				return err
			}
			target, err := logsTarget(args[0], namespace, "")
			if err != nil {
				return err
			}
			cl, err := cli.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(local)))
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("port-forward: local port %d is taken: give another as LOCAL:%d (0:%d picks a free one): %w", local, remote, remote, err)
			}
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "Forwarding %s to port %d of %s\n", l.Addr(), remote, args[0])
			errOut := cmd.ErrOrStderr()
			return cl.ServePortForward(ctx, l, target, remote, func(err error) { fmt.Fprintf(errOut, "port-forward: %v\n", err) })
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", legion.DefaultNamespace, "namespace of the task, service or job")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "local address to listen on")
	return cmd
}

// parsePorts reads [LOCAL:]PORT.
func parsePorts(arg string) (local, remote int, err error) {
	l, r, pair := strings.Cut(arg, ":")
	if !pair {
		r = l
	}
	if remote, err = strconv.Atoi(r); err != nil || remote < 1 || remote > 65535 {
		return 0, 0, fmt.Errorf("%q: the pod's port must be 1 to 65535", arg)
	}
	local = remote
	if pair {
		if local, err = strconv.Atoi(l); err != nil || local < 0 || local > 65535 {
			return 0, 0, fmt.Errorf("%q: the local port must be 0 to 65535", arg)
		}
	}
	return local, remote, nil
}
