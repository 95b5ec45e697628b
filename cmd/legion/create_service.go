package main

import (
	"cmp"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"github.com/spf13/cobra"
)

// serviceFlags are what create service makes a Service of.
type serviceFlags struct {
	image, mode, output string
	replicas            int
	publish, ports      []string
	env, labels         []string
	command, dryRun     bool
}

// createServiceCommand is docker service create and kubectl create
// deployment: a Service of one container from flags, for a first try or
// a script, and with --dry-run -o yaml the manifest to start a file from.
func createServiceCommand(c *clusterCLI) *cobra.Command {
	var f serviceFlags
	var ns string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:     "service NAME --image IMAGE [-p PUBLISHED:TARGET]... [--replicas N] [-e KEY=VALUE]... [-- ARG...]",
		Aliases: []string{"svc"},
		Short:   "Make a Service of one container, as docker service create and kubectl create deployment do",
		Long: `Create service makes a Service named NAME that runs IMAGE in one
container (named NAME too). The words after -- replace the image's
arguments (its CMD), as docker service create's COMMAND ARG... do; with
--command they replace its command (ENTRYPOINT) as well, as kubectl
create deployment's do.

-p publishes a port as docker does (8080:80, 8080:80/udp, 8000-8001:80-81):
the target is a container port and a port of the service's VIP, and the
published port is served on every node (the routing mesh). --port adds a
container and VIP port that is not published. A Service already there is
refused, not replaced: legion apply or legion edit change it.

--dry-run has the cluster check the service as it would make it, and
makes nothing (apply's --dry-run). With -o yaml it prints the manifest
instead, its defaults written as legion validate prints them, without
asking the cluster: a start for a file that legion apply reads.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("create service: %w", err)
			}
			name, rest := args[0], args[1:]
			if cmd.ArgsLenAtDash() != 1 && len(rest) > 0 {
				return fmt.Errorf("create service: %q: the container's arguments go after --, as in legion create service %s --image IMAGE -- %s", rest[0], name, strings.Join(rest, " "))
			}
			s, err := f.service(name, ns, rest, cmd.Flags().Changed("replicas"))
			if err != nil {
				return fmt.Errorf("create service: %w", err)
			}
			fm, err := parseOutput(cmp.Or(f.output, "table"))
			if err != nil {
				return err
			}
			if f.dryRun && wf.wait {
				return errors.New("create service: --wait and --dry-run: a dry run starts nothing to wait for")
			}
			if f.dryRun && f.output != "" {
				// The manifest, made here: no cluster is needed for it.
				l := objectListing([]legion.Object{s}, false, true, time.Now())
				return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			// With -o the answer holds the stored service to print.
			res, err := createNew(ctxOf(cmd), cl, s, client.ApplyOptions{DryRun: f.dryRun, Brief: f.output == ""})
			if errors.Is(err, client.ErrAborted) {
				return fmt.Errorf("create service: service %s exists: legion apply or legion edit change it", legion.DisplayName(s))
			}
			if err != nil {
				return fmt.Errorf("create service: %w", err)
			}
			if f.dryRun {
				fmt.Fprintf(cmd.OutOrStdout(), "%s %s (dry run)\n", ref(res.Object), res.Outcome)
				return nil
			}
			if f.output != "" {
				l := objectListing([]legion.Object{res.Object}, false, true, time.Now())
				if err := l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s created\n", ref(res.Object))
			}
			warnApplied(cmd.ErrOrStderr(), []legion.Object{s}, listWith(ctxOf(cmd), cl))
			if !wf.wait {
				return nil
			}
			m := res.Object.GetMetadata()
			return followRollout(ctxOf(cmd), cl, cmd.OutOrStdout(), m.Namespace, m.Name, wf.timeout, false)
		},
	}
	fl := cmd.Flags()
	fl.Var(&onceFlag{v: &f.image, why: "a service made here has one container; a manifest has room for more"}, "image", "the container's image (required)")
	fl.IntVar(&f.replicas, "replicas", 1, "how many tasks run it (replicated mode)")
	fl.StringVar(&f.mode, "mode", string(legion.ModeReplicated), "replicated, or global: one task on every node that may run it")
	fl.StringArrayVarP(&f.publish, "publish", "p", nil, "publish a port, PUBLISHED:TARGET[/PROTOCOL] as docker takes it (repeatable)")
	fl.StringArrayVar(&f.ports, "port", nil, "a container port, also a port of the service's VIP, not published (repeatable)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "an environment variable, KEY=VALUE (repeatable)")
	fl.StringArrayVarP(&f.labels, "label", "l", nil, "a label of the service, key=value (repeatable, or comma-separated)")
	fl.BoolVar(&f.command, "command", false, "the words after -- are the command (ENTRYPOINT) and its arguments, not the arguments alone")
	fl.BoolVar(&f.dryRun, "dry-run", false, "make nothing: have the cluster check it, or with -o print its manifest")
	fl.StringVarP(&f.output, "output", "o", "", "print the service made as yaml or json (as legion get -o does), rather than a line")
	fl.StringVarP(&ns, "namespace", "n", "", "namespace of the service (default: default)")
	wf.add(cmd)
	return cmd
}

// service is the Service the flags describe, through admission as an
// apply would be: its defaults written (as legion validate prints them),
// every problem named.
func (f serviceFlags) service(name, ns string, words []string, replicasSet bool) (*legion.Service, error) {
	if f.image == "" {
		return nil, errors.New("--image is required: the image the service runs")
	}
	if err := legion.ValidName(name); err != nil {
		return nil, fmt.Errorf("name %q: %w", name, err)
	}
	labels, err := keyValues("--label", f.labels)
	if err != nil {
		return nil, err
	}
	ctr := legion.Container{Name: name, Image: f.image}
	if f.command {
		if len(words) == 0 {
			return nil, errors.New("--command: expected the command after --")
		}
		ctr.Command = words
	} else {
		ctr.Args = words
	}
	for _, e := range f.env {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q: expected KEY=VALUE", e)
		}
		ctr.Env = append(ctr.Env, legion.EnvVar{Name: k, Value: v})
	}
	o, _ := legion.New(legion.KindService)
	s := o.(*legion.Service)
	s.Metadata = legion.Metadata{Name: name, Namespace: cmp.Or(ns, legion.DefaultNamespace), Labels: labels}
	// A target is one port of the service (its VIP port is the target),
	// so it is given once, where Docker would publish it twice.
	given := map[string]string{}
	addPorts := func(flag, p string, publish bool) error {
		ctrs, svcs, err := compose.Ports(p)
		if err != nil {
			return fmt.Errorf("%s %w", flag, err)
		}
		for _, sp := range svcs {
			if !publish && sp.PublishedPort != 0 {
				return fmt.Errorf("%s %q: a port to publish goes in --publish (-p)", flag, p)
			}
			key := fmt.Sprintf("%d/%s", sp.Port, sp.Protocol)
			if before, ok := given[key]; ok {
				return fmt.Errorf("%s %q: target %s is given already (%s): a target is one port of the service, published once at most", flag, p, key, before)
			}
			given[key] = flag + " " + p
		}
		ctr.Ports = append(ctr.Ports, ctrs...)
		s.Spec.Endpoint.Ports = append(s.Spec.Endpoint.Ports, svcs...)
		return nil
	}
	for _, p := range f.publish {
		if err := addPorts("--publish", p, true); err != nil {
			return nil, err
		}
	}
	for _, p := range f.ports {
		if err := addPorts("--port", p, false); err != nil {
			return nil, err
		}
	}
	s.Spec.Pod.Containers = []legion.Container{ctr}
	switch legion.ServiceMode(f.mode) {
	case legion.ModeReplicated:
		n := f.replicas
		s.Spec.Replicas = &n
	case legion.ModeGlobal:
		if replicasSet {
			return nil, errors.New("--replicas: a global service runs one task on every node that may run it, not a count")
		}
		s.Spec.Mode = legion.ModeGlobal
	default:
		return nil, fmt.Errorf("--mode %q: expected replicated or global (a stateful service needs its volumes: write its manifest)", f.mode)
	}
	if err := legion.Admit(s); err != nil {
		return nil, err
	}
	return s, nil
}
