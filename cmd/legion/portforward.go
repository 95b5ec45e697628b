package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/legionbsd/legion"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
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
			conn, err := cli.podsConn(cmd)
			if err != nil {
				return err
			}
			defer conn.Close()
			l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(local)))
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "Forwarding %s to port %d of %s\n", l.Addr(), remote, args[0])
			return forward(ctx, l, conn, target, remote, cmd.ErrOrStderr())
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

// forward serves the listener until ctx ends, one stream a connection.
func forward(ctx context.Context, l net.Listener, conn *grpc.ClientConn, target *legionpb.Target, port int, errOut io.Writer) error {
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := forwardOne(ctx, c, conn, target, port); err != nil && ctx.Err() == nil {
				if s, ok := status.FromError(err); ok {
					err = errors.New(s.Message())
				}
				fmt.Fprintf(errOut, "port-forward: %v\n", err)
			}
		}()
	}
}

// forwardOne carries one local connection over a PortForward stream.
func forwardOne(ctx context.Context, c net.Conn, conn *grpc.ClientConn, target *legionpb.Target, port int) error {
	defer c.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := legionpb.NewPodsClient(conn).PortForward(sctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&legionpb.PortForwardInput{Target: target, Port: int32(port)}); err != nil {
		return err
	}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				if stream.Send(&legionpb.PortForwardInput{Data: append([]byte(nil), buf[:n]...)}) != nil {
					return
				}
			}
			if err != nil {
				stream.Send(&legionpb.PortForwardInput{Closed: true})
				stream.CloseSend()
				return
			}
		}
	}()
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(m.Data) > 0 {
			if _, err := c.Write(m.Data); err != nil {
				return err
			}
		}
	}
}
