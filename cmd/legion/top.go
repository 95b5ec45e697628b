package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/topui"
	"github.com/spf13/cobra"
	"golang.org/x/term"
	"google.golang.org/grpc/codes"
)

// topRefresh is how often legion top reads the cluster again.
const topRefresh = 2 * time.Second

// topEventsSince is how far back the events tab reaches.
const topEventsSince = time.Hour

// topMaxEvents bounds the events tab.
const topMaxEvents = 500

func (c *clusterCLI) topCommand() *cobra.Command {
	var once bool
	var width int
	cmd := &cobra.Command{
		Use:   "top [nodes|tasks|services]",
		Short: "Watch the cluster live in the terminal, or show usage against requests, limits and capacity",
		Long: `Without an argument, legion top shows the cluster in the terminal: a
header with nodes and tasks by state, the managers, and CPU and memory
in use against what the nodes can allocate (with the last 20 minutes as
a graph), then tabs of nodes, workloads, tasks, storage, network, config
and events. / filters the rows, Enter on a node or workload lists its
tasks, l follows the selected task's log in a pane, and keys act on the
selected row through the calls the CLI makes (drain, pause, activate,
scale, rollback, suspend, resume, delete: asked first where it cannot be
undone). NO_COLOR draws without colours. --once prints every view as text
and exits; without a terminal, that or a listing below is what works.

legion top nodes, tasks and services print what the nodes' last reports
say is used, against capacity, requests and limits.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !once && !onTerminal(cmd) {
				return errors.New("legion top draws in a terminal, and standard input and output are not both one: " +
					"--once prints every view as text, legion top nodes|tasks|services print one table")
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := ctxOf(cmd)
			if once {
				d, err := readTop(ctx, cl, time.Now())
				if err != nil {
					return err
				}
				if width <= 0 {
					width = termWidth()
				}
				_, err = fmt.Fprint(cmd.OutOrStdout(), topui.Once(d, width))
				return err
			}
			return runTop(ctx, cl)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "print every view as text and exit")
	cmd.Flags().IntVar(&width, "width", 0, "with --once, the width to lay the views out in (default: the terminal's, or 160)")
	return cmd
}

// onTerminal: the command reads and writes a terminal, as the live view
// needs (it takes keys and draws on the screen).
func onTerminal(cmd *cobra.Command) bool {
	in, ok := cmd.InOrStdin().(*os.File)
	out, ok2 := cmd.OutOrStdout().(*os.File)
	return ok && ok2 && term.IsTerminal(int(in.Fd())) && term.IsTerminal(int(out.Fd()))
}

func termWidth() int {
	if w, _, err := term.GetSize(int(os.Stdout.Fd())); err == nil && w > 0 {
		return w
	}
	return 160
}

// readTop reads everything legion top shows. A kind the caller may not
// list, the usage or the events missing, are said in the views rather
// than failing the whole reading; any other failure fails it.
func readTop(ctx context.Context, cl *client.Client, now time.Time) (topui.Data, error) {
	d := topui.Data{Now: now, Objects: map[legion.Kind][]legion.Object{}, Denied: map[legion.Kind]string{}, Note: map[string]string{}}
	for _, k := range topui.Kinds {
		objs, _, err := cl.List(ctx, k, client.ListOptions{AllNamespaces: true})
		if err != nil {
			if client.Code(err) != codes.PermissionDenied {
				return d, fmt.Errorf("listing %s: %w", plural(string(k)), err)
			}
			d.Denied[k] = err.Error()
			continue
		}
		d.Objects[k] = objs
	}
	d.DropSecretValues()
	if us, err := cl.Usage(ctx, ""); err != nil {
		d.Note["nodes"] = "usage not available: " + err.Error()
		d.Note["tasks"] = d.Note["nodes"]
	} else {
		d.Usage = us
	}
	err := cl.Events(ctx, client.EventsOptions{Since: topEventsSince}, func(e legion.Event) error {
		d.Events = append(d.Events, e)
		if len(d.Events) > topMaxEvents {
			d.Events = d.Events[1:]
		}
		return nil
	})
	if err != nil {
		d.Events = nil
		d.Note["events"] = "not available from this cluster: " + err.Error()
	}
	if st, err := cl.Status(ctx); err == nil {
		for _, m := range st.Members {
			d.Managers = append(d.Managers, topui.Manager{Name: m.ID, Leader: m.Leader, State: m.Reachability})
		}
	}
	return d, nil
}

// runTop runs the terminal UI until the user quits or the terminal goes.
func runTop(ctx context.Context, cl *client.Client) error {
	m := topui.New(topBackend{cl}, os.Getenv("NO_COLOR") == "")
	p := tea.NewProgram(m, tea.WithAltScreen(), tea.WithContext(ctx))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(topRefresh)
		defer t.Stop()
		for {
			if d, err := readTop(ctx, cl, time.Now()); err == nil {
				p.Send(topui.DataMsg(d))
			} else if ctx.Err() == nil {
				p.Send(topui.DataMsg(topui.Data{Now: time.Now(), Note: map[string]string{"nodes": "cluster unreachable: " + err.Error()}}))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	_, err := p.Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil
	}
	return err
}

// topBackend carries legion top's actions out through the calls the CLI
// commands make.
type topBackend struct{ cl *client.Client }

func (b topBackend) Do(ctx context.Context, a topui.Action) (string, error) {
	setAvailability := func(av legion.Availability) error {
		_, err := changeObject(ctx, b.cl, legion.KindNode, "", a.Name, func(o legion.Object) error {
			o.(*legion.Node).Spec.Availability = av
			return nil
		})
		return err
	}
	ref := strings.ToLower(string(a.Kind)) + "/" + a.Name
	switch a.Verb {
	case "drain":
		return ref + " " + availabilityVerb[legion.AvailabilityDrain], setAvailability(legion.AvailabilityDrain)
	case "pause":
		return ref + " " + availabilityVerb[legion.AvailabilityPause], setAvailability(legion.AvailabilityPause)
	case "activate":
		return ref + " " + availabilityVerb[legion.AvailabilityActive], setAvailability(legion.AvailabilityActive)
	case "scale":
		var n int
		_, err := changeObject(ctx, b.cl, legion.KindService, a.Namespace, a.Name, func(o legion.Object) error {
			s := o.(*legion.Service)
			n = s.Status.Replicas + a.Replicas
			if s.Spec.Replicas != nil {
				n = *s.Spec.Replicas + a.Replicas
			}
			return setReplicas(s, n)
		})
		return fmt.Sprintf("%s scaled to %d", ref, n), err
	case "rollback":
		_, err := changeObject(ctx, b.cl, legion.KindService, a.Namespace, a.Name, func(o legion.Object) error { return rollBack(o.(*legion.Service)) })
		return ref + " rolled back to its previous spec", err
	case "restart":
		_, err := changeObject(ctx, b.cl, legion.KindService, a.Namespace, a.Name, restart(time.Now()))
		return ref + " restarting", err
	case "suspend", "resume":
		_, err := changeObject(ctx, b.cl, legion.KindCronJob, a.Namespace, a.Name, func(o legion.Object) error {
			o.(*legion.CronJob).Spec.Suspend = a.Verb == "suspend"
			return nil
		})
		return ref + " " + a.Verb + "d", err
	case "delete":
		_, err := b.cl.Delete(ctx, a.Kind, a.Namespace, a.Name, nil)
		return ref + " deleted", err
	}
	return "", fmt.Errorf("legion top has no action %q", a.Verb)
}

func (b topBackend) Logs(ctx context.Context, ns, task, container string, line func(string)) error {
	t := client.Target{Namespace: ns, Kind: legion.KindTask, Name: task, Container: container}
	var partial string
	return b.cl.Logs(ctx, t, client.LogsOptions{Follow: true}, func(f client.LogFrame) error {
		for _, r := range f.Records {
			if r.Partial {
				partial += r.Text
				continue
			}
			line(partial + strings.TrimRight(r.Text, "\n"))
			partial = ""
		}
		return nil
	})
}
