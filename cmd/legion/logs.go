package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
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
func logsTarget(arg, namespace, container string) (client.Target, error) {
	t := client.Target{Namespace: namespace, Name: arg, Container: container}
	if kind, name, ok := strings.Cut(arg, "/"); ok {
		k, err := resolveKind(kind)
		if err != nil || (k != legion.KindTask && k != legion.KindService && k != legion.KindJob) {
			return t, fmt.Errorf("%s: logs read a task, a service or a job, not %q", arg, kind)
		}
		t.Kind, t.Name = k, name
	}
	if t.Name == "" {
		return t, fmt.Errorf("%q: a name is required", arg)
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
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Interrupting a follow is how it ends: that is no failure.
	ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lo := client.LogsOptions{Follow: o.follow}
	if o.since > 0 {
		lo.Since = time.Now().Add(-o.since)
	}
	p := logPrinter{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), timestamps: o.timestamps}
	if err := cl.Logs(ctx, target, lo, p.print); err != nil {
		return fmt.Errorf("logs %s: %w", arg, err)
	}
	return nil
}

// logPrinter writes each record's text, stderr records to stderr.
type logPrinter struct {
	stdout, stderr io.Writer
	timestamps     bool
	// A record that is part of a longer line goes on in the next one:
	// the time is printed only at the start of a line of each stream.
	midLine map[string]bool
}

func (p *logPrinter) print(f client.LogFrame) error {
	if p.midLine == nil {
		p.midLine = map[string]bool{}
	}
	for _, r := range f.Records {
		w := p.stdout
		if r.Stream == "stderr" {
			w = p.stderr
		}
		var b strings.Builder
		if p.timestamps && !p.midLine[r.Stream] && !r.Time.IsZero() {
			b.WriteString(r.Time.UTC().Format(time.RFC3339Nano))
			b.WriteByte(' ')
		}
		b.WriteString(r.Text)
		if !r.Partial {
			b.WriteByte('\n')
		}
		p.midLine[r.Stream] = r.Partial
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}
