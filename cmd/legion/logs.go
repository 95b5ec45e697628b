package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/pki"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// logsOptions are the flags of legion logs.
type logsOptions struct {
	namespace  string
	container  string
	follow     bool
	since      time.Duration
	timestamps bool
}

// newLogsCommand is `legion logs`: a task's output, read by the agent of
// its node through any manager, live or (once the pod is gone) as saved.
func newLogsCommand() *cobra.Command {
	cli := newClusterCLI()
	var o logsOptions
	cmd := &cobra.Command{
		Use:   "logs [-f] [--since DURATION] TASK|SERVICE|JOB [-c CONTAINER]",
		Short: "Print a task's output; a service or job's running task, else the one that last ended",
		Long: `Logs prints the output of a task's container: stdout to standard output,
stderr to standard error. A service or job name reads one of its running
tasks, or the task that last ended on a node when none runs; a finished
task's output is kept on its node until the task is deleted. Name the
kind to be sure (service/web, job/migrate, task/web.1). A pod with
several containers needs -c.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.logs(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", legion.DefaultNamespace, "namespace of the task, service or job")
	f.StringVarP(&o.container, "container", "c", "", "container to read, when the pod has several")
	f.BoolVarP(&o.follow, "follow", "f", false, "go on printing new output until interrupted")
	f.DurationVar(&o.since, "since", 0, "only output of the last DURATION (e.g. 10m)")
	f.BoolVar(&o.timestamps, "timestamps", false, "print each line's time before it")
	return cmd
}

// logsTarget reads TASK, SERVICE or JOB, optionally as kind/name.
func logsTarget(arg, namespace, container string) (*legionpb.Target, error) {
	t := &legionpb.Target{Namespace: namespace, Name: arg, Container: container}
	if kind, name, ok := strings.Cut(arg, "/"); ok {
		k, err := resolveKind(kind)
		if err != nil || (k != legion.KindTask && k != legion.KindService && k != legion.KindJob) {
			return nil, fmt.Errorf("%s: logs read a task, a service or a job, not %q", arg, kind)
		}
		t.Kind, t.Name = string(k), name
	}
	if t.Name == "" {
		return nil, fmt.Errorf("%q: a name is required", arg)
	}
	return t, nil
}

func (c *clusterCLI) logs(cmd *cobra.Command, arg string, o logsOptions) error {
	target, err := logsTarget(arg, o.namespace, o.container)
	if err != nil {
		return err
	}
	if o.since < 0 {
		return fmt.Errorf("--since %s: expected a positive duration", o.since)
	}
	conn, err := c.podsConn(cmd)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Interrupting a follow is how it ends: that is no failure.
	ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
	defer stop()
	req := &legionpb.LogsRequest{Target: target, Follow: o.follow}
	if o.since > 0 {
		req.SinceUnixNano = time.Now().Add(-o.since).UnixNano()
	}
	stream, err := legionpb.NewPodsClient(conn).Logs(ctx, req)
	if err == nil {
		err = printLogs(stream, cmd.OutOrStdout(), cmd.ErrOrStderr(), o.timestamps)
	}
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil && status.Code(err) == codes.Canceled:
		return nil
	}
	if s, ok := status.FromError(err); ok {
		return fmt.Errorf("logs %s: %s", arg, s.Message())
	}
	return fmt.Errorf("logs %s: %w", arg, err)
}

// logsStream is what printLogs reads: a Pods.Logs stream.
type logsStream interface {
	Recv() (*legionpb.LogFrame, error)
}

// printLogs writes each record's text, stderr records to stderr, until the
// stream ends.
func printLogs(stream logsStream, stdout, stderr io.Writer, timestamps bool) error {
	// A record that is part of a longer line goes on in the next one: the
	// time is printed only at the start of a line of each stream.
	midLine := map[string]bool{}
	for {
		f, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range f.Records {
			w := stdout
			if r.Stream == "stderr" {
				w = stderr
			}
			var b strings.Builder
			if timestamps && !midLine[r.Stream] && r.TimeUnixNano != 0 {
				b.WriteString(time.Unix(0, r.TimeUnixNano).UTC().Format(time.RFC3339Nano))
				b.WriteByte(' ')
			}
			b.WriteString(r.Text)
			if !r.Partial {
				b.WriteByte('\n')
			}
			midLine[r.Stream] = r.Partial
			if _, err := io.WriteString(w, b.String()); err != nil {
				return err
			}
		}
	}
}

// podsConn dials the manager for the Pods service (logs, exec), which the
// client package does not wrap: its calls are streams of their own.
func (c *clusterCLI) podsConn(cmd *cobra.Command) (*grpc.ClientConn, error) {
	credsFile := c.v.GetString("credentials")
	if f := cmd.Flags().Lookup("credentials"); f != nil && f.Changed {
		credsFile = f.Value.String()
	}
	if credsFile == "" {
		return nil, errors.New("no credentials: pass --credentials or set LEGION_CREDENTIALS (legion init prints where admin.pem is)")
	}
	creds, err := pki.LoadBundle(credsFile)
	if err != nil {
		return nil, err
	}
	server := c.server(cmd)
	conn, err := grpc.NewClient(server, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	return conn, nil
}
