package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
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
0 or nothing, as in :PORT, picks a free one) and carries each connection to
PORT of the task's pod (a service or job name picks one of its running
tasks), until interrupted.
Nothing needs to be published: the agent of the pod's node connects.

PORT is a port number or the name of a container port of the pod. For a
service, one of the service's own ports (spec.endpoint.ports, by number or
name) is carried to its target port, as kubectl port-forward svc/NAME
does: "service/web 8000:80" reaches the pod's port that port 80 serves.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			local, ref, err := parsePorts(args[1])
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
			remote, via := ref.Number, ""
			obj, err := sessionObject(ctxOf(cmd), cl, target)
			switch {
			case err == nil:
				if remote, via, err = forwardPort(obj, ref); err != nil {
					return err
				}
			case ref.Name != "", lasting(err):
				// Gone, or not the caller's: no connection would be
				// forwarded, so nothing is listened on.
				return fmt.Errorf("port-forward %s: %w", args[0], err)
			}
			// Without the object (not read for a passing reason), a
			// number is the pod's port, as it says.
			if local < 0 {
				local = remote
			}
			// Refused now rather than at each connection: the caller's
			// rights, and a task running to reach.
			if _, err := cl.CheckPortForward(ctxOf(cmd), target, remote); err != nil {
				return fmt.Errorf("port-forward %s: %w", args[0], err)
			}
			l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(local)))
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("port-forward: local port %d is taken: give another as LOCAL:%s (0:%s picks a free one): %w", local, ref, ref, err)
			}
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(cmd.OutOrStdout(), "Forwarding %s to port %d of %s%s\n", l.Addr(), remote, args[0], via)
			errOut := cmd.ErrOrStderr()
			return cl.ServePortForward(ctx, l, target, remote, func(err error) { fmt.Fprintf(errOut, "port-forward: %v\n", err) })
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", legion.DefaultNamespace, "namespace of the task, service or job")
	cmd.Flags().StringVar(&address, "address", "127.0.0.1", "local address to listen on")
	return cmd
}

// parsePorts reads [LOCAL:]PORT: PORT a number or a port's name; local
// is -1 when not given (PORT's number, once a name is resolved), and 0,
// a free port, for an empty LOCAL (kubectl's :PORT).
func parsePorts(arg string) (local int, remote legion.PortRef, err error) {
	l, r, pair := strings.Cut(arg, ":")
	if !pair {
		r = l
	}
	if n, err := strconv.Atoi(r); err == nil {
		if n < 1 || n > 65535 {
			return 0, remote, fmt.Errorf("%q: the pod's port must be 1 to 65535, or a port's name", arg)
		}
		remote = legion.PortRef{Number: n}
	} else if r == "" || strings.HasPrefix(r, "-") {
		return 0, remote, fmt.Errorf("%q: the pod's port must be 1 to 65535, or a port's name", arg)
	} else {
		remote = legion.PortRef{Name: r}
	}
	local = -1
	if pair && l == "" {
		return 0, remote, nil // kubectl's :PORT: a free local port
	}
	if pair {
		if local, err = strconv.Atoi(l); err != nil || local < 0 || local > 65535 {
			return 0, remote, fmt.Errorf("%q: the local port must be 0 to 65535", arg)
		}
	}
	return local, remote, nil
}

// sessionObject is the task, service or job a session's target names:
// of its kind, or, without one, whichever has the name (a task's first),
// else a task of the stateful ordinal of that name (db-0), as the manager
// resolves it.
func sessionObject(ctx context.Context, cl *client.Client, t client.Target) (legion.Object, error) {
	ns := cmp.Or(t.Namespace, legion.DefaultNamespace)
	if t.Kind != "" {
		return cl.Get(ctx, t.Kind, ns, t.Name)
	}
	for _, k := range []legion.Kind{legion.KindTask, legion.KindService, legion.KindJob} {
		o, err := cl.Get(ctx, k, ns, t.Name)
		if err == nil {
			return o, nil
		}
		if !errors.Is(err, client.ErrNotFound) {
			return nil, err
		}
	}
	tasks, _, err := cl.List(ctx, legion.KindTask, client.ListOptions{Namespace: ns})
	if err != nil {
		return nil, err
	}
	for _, o := range tasks {
		if tk := o.(*legion.Task); tk.OfOrdinal(t.Name) {
			return tk, nil // its pod's ports, as of the ordinal's task
		}
	}
	return nil, fmt.Errorf("no task, service, job or stateful ordinal %s in namespace %s: %w", t.Name, ns, client.ErrNotFound)
}

// forwardPort is the pod's port that ref means for obj, a Task, Service
// or Job, and how it was found when not as given (for the user): a
// Service's own port, by number or name, is carried to its target port,
// as kubectl does for svc/NAME; a name is a container port's of the pod;
// another number is the pod's port itself.
func forwardPort(obj legion.Object, ref legion.PortRef) (int, string, error) {
	pod := podOf(obj)
	if pod == nil {
		return 0, "", fmt.Errorf("port-forward: a %s has no pod", obj.GetKind())
	}
	if s, ok := obj.(*legion.Service); ok {
		for _, p := range s.Spec.Endpoint.Ports {
			if ref.Name != "" && p.Name != ref.Name || ref.Name == "" && p.Port != ref.Number {
				continue
			}
			via := fmt.Sprintf(" (the service's port %d", p.Port)
			if p.Name != "" {
				via += ", " + p.Name
			}
			via += ")"
			if p.TargetPort.Name == "" {
				return p.TargetPort.Number, via, nil
			}
			cp, ok := pod.FindPort(p.TargetPort)
			if !ok {
				return 0, "", fmt.Errorf("port-forward: the service's port %d targets %q, which no container port of its pod is named", p.Port, p.TargetPort.Name)
			}
			return cp.ContainerPort, via, nil
		}
	}
	if ref.Name == "" {
		return ref.Number, "", nil
	}
	cp, ok := pod.FindPort(ref)
	if !ok {
		return 0, "", fmt.Errorf("port-forward: no container port of %s's pod is named %q%s", obj.GetMetadata().Name, ref.Name, portNames(obj))
	}
	return cp.ContainerPort, " (" + ref.Name + ")", nil
}

// portNames lists the port names ref could have been, for an error.
func portNames(obj legion.Object) string {
	var names []string
	if s, ok := obj.(*legion.Service); ok {
		for _, p := range s.Spec.Endpoint.Ports {
			if p.Name != "" {
				names = append(names, p.Name)
			}
		}
	}
	for _, c := range podOf(obj).Containers {
		for _, p := range c.Ports {
			if p.Name != "" {
				names = append(names, p.Name)
			}
		}
	}
	slices.Sort(names)
	if names = slices.Compact(names); len(names) == 0 {
		return " (it names none)"
	}
	return " (it names " + strings.Join(names, ", ") + ")"
}

// podOf is the pod of a Task, Service or Job.
func podOf(obj legion.Object) *legion.PodSpec {
	if t, ok := obj.(*legion.Task); ok {
		return &t.Spec.Pod
	}
	return legion.PodOf(obj)
}
