package main

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// containerFlags are the flags of the one container create makes (of a
// service, job or cron job): --image, -e, --command and the words after
// --.
type containerFlags struct {
	image   string
	env     []string
	command bool
}

func (f *containerFlags) add(fl *pflag.FlagSet, why string) {
	fl.Var(&onceFlag{v: &f.image, why: why}, "image", "the container's image (required)")
	fl.StringArrayVarP(&f.env, "env", "e", nil, "an environment variable, KEY=VALUE (repeatable)")
	fl.BoolVar(&f.command, "command", false, "the words after -- are the command (ENTRYPOINT) and its arguments, not the arguments alone")
}

// container is the container the flags describe, named name, running the
// words after -- as its arguments (or, with --command, its command).
func (f containerFlags) container(name string, words []string) (legion.Container, error) {
	if f.image == "" {
		return legion.Container{}, errors.New("--image is required: the image the container runs")
	}
	ctr := legion.Container{Name: name, Image: f.image}
	if f.command {
		if len(words) == 0 {
			return ctr, errors.New("--command: expected the command after --")
		}
		ctr.Command = words
	} else {
		ctr.Args = words
	}
	for _, e := range f.env {
		k, v, ok := strings.Cut(e, "=")
		if !ok || k == "" {
			return ctr, fmt.Errorf("--env %q: expected KEY=VALUE", e)
		}
		ctr.Env = append(ctr.Env, legion.EnvVar{Name: k, Value: v})
	}
	return ctr, nil
}

// argsAfterDash checks that the words after NAME came after --, and
// returns them.
func argsAfterDash(cmd *cobra.Command, what string, args []string) ([]string, error) {
	name, rest := args[0], args[1:]
	if cmd.ArgsLenAtDash() != 1 && len(rest) > 0 {
		return nil, fmt.Errorf("%s: %q: the container's arguments go after --, as in legion %s %s --image IMAGE -- %s", what, rest[0], what, name, strings.Join(rest, " "))
	}
	return rest, nil
}

// createOutput are --dry-run and -o of the create commands that make an
// object from flags.
type createOutput struct {
	output string
	dryRun bool
}

func (f *createOutput) add(fl *pflag.FlagSet, kind string) {
	fl.BoolVar(&f.dryRun, "dry-run", false, "make nothing: have the cluster check it, or with -o print its manifest")
	fl.StringVarP(&f.output, "output", "o", "", "print the "+kind+" made as yaml or json (as legion get -o does), rather than a line")
}

// create stores o, made from flags, as create service and create job do:
// with --dry-run -o the manifest is printed without a cluster, with
// --dry-run alone the cluster checks it, else it is made (a name taken is
// refused) and printed as -o asks, or said in a line (note added to
// it). It returns the
// client, still open, and the object stored, for what follows; nil
// for a dry run.
func (f createOutput) create(cmd *cobra.Command, c *clusterCLI, what string, o legion.Object, wait bool, note string) (*client.Client, legion.Object, error) {
	fm, err := parseOutput(cmp.Or(f.output, "table"))
	if err != nil {
		return nil, nil, err
	}
	if f.dryRun && wait {
		return nil, nil, fmt.Errorf("%s: --wait and --dry-run: a dry run starts nothing to wait for", what)
	}
	if f.dryRun && f.output != "" {
		// The manifest, made here: no cluster is needed for it.
		l := objectListing([]legion.Object{o}, false, true, time.Now())
		return nil, nil, l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return nil, nil, err
	}
	// With -o the answer holds the stored object to print.
	res, err := createNew(ctxOf(cmd), cl, o, client.ApplyOptions{DryRun: f.dryRun, Brief: f.output == ""})
	if errors.Is(err, client.ErrAborted) {
		noun := strings.ToLower(string(o.GetKind()))
		err = fmt.Errorf("%s %s exists: legion apply or legion edit change it", noun, legion.DisplayName(o))
		if k := o.GetKind(); k == legion.KindSecret || k == legion.KindConfig {
			err = fmt.Errorf("%w (a new value: legion create %s %s FILE --dry-run -o yaml | legion apply -f -)", err, noun, o.GetMetadata().Name)
		}
	}
	if err == nil && f.dryRun {
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s (dry run)\n", ref(res.Object), res.Outcome)
		cl.Close()
		return nil, nil, nil
	}
	if err == nil && f.output != "" {
		l := objectListing([]legion.Object{res.Object}, false, true, time.Now())
		err = l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
	} else if err == nil {
		fmt.Fprintf(cmd.OutOrStdout(), "%s created%s\n", ref(res.Object), note)
	}
	if err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	warnApplied(cmd.ErrOrStderr(), []legion.Object{o}, listWith(ctxOf(cmd), cl))
	return cl, res.Object, nil
}

// serviceFlags are what create service makes a Service of.
type serviceFlags struct {
	containerFlags
	createOutput
	mode           string
	replicas       int
	publish, ports []string
	labels         []string
	// Docker's resources (--limit-cpu 0.5, --reserve-memory 64m) and
	// placement constraints (node.labels.disk == ssd).
	limitCPU, limitMemory, reserveCPU, reserveMemory string
	constraints                                      []string
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
			words, err := argsAfterDash(cmd, "create service", args)
			if err != nil {
				return err
			}
			s, err := f.service(args[0], ns, words, cmd.Flags().Changed("replicas"))
			if err != nil {
				return fmt.Errorf("create service: %w", err)
			}
			cl, made, err := f.create(cmd, c, "create service", s, wf.wait, "")
			if cl == nil || err != nil {
				return err
			}
			defer cl.Close()
			if !wf.wait {
				return nil
			}
			m := made.GetMetadata()
			return followRollout(ctxOf(cmd), cl, cmd.OutOrStdout(), m.Namespace, m.Name, wf.timeout, false)
		},
	}
	fl := cmd.Flags()
	f.containerFlags.add(fl, "a service made here has one container; a manifest has room for more")
	fl.IntVar(&f.replicas, "replicas", 1, "how many tasks run it (replicated mode)")
	fl.StringVar(&f.mode, "mode", string(legion.ModeReplicated), "replicated, or global: one task on every node that may run it")
	fl.StringArrayVarP(&f.publish, "publish", "p", nil, "publish a port, PUBLISHED:TARGET[/PROTOCOL] as docker takes it (repeatable)")
	fl.StringArrayVar(&f.ports, "port", nil, "a container port, also a port of the service's VIP, not published (repeatable)")
	fl.StringArrayVarP(&f.labels, "label", "l", nil, "a label of the service, key=value (repeatable, or comma-separated)")
	fl.StringVar(&f.limitCPU, "limit-cpu", "", "the CPUs each task may use at most, as docker takes it (0.5)")
	fl.StringVar(&f.limitMemory, "limit-memory", "", "the memory each task may use at most, as docker takes it (512m, 1g: binary units)")
	fl.StringVar(&f.reserveCPU, "reserve-cpu", "", "the CPUs each task requests, which placement counts (0.25)")
	fl.StringVar(&f.reserveMemory, "reserve-memory", "", "the memory each task requests, which placement counts (256m)")
	fl.StringArrayVar(&f.constraints, "constraint", nil, "a placement constraint, as docker takes it: node.labels.KEY == VALUE, node.role != manager, node.hostname == HOST (repeatable)")
	// docker service create --name: the name is NAME here.
	fl.VarPF(&kubectlFlag{why: "the service's name is the word after create service here: legion create service NAME --image IMAGE"}, "name", "", "docker's").Hidden = true
	f.createOutput.add(fl, "service")
	fl.StringVarP(&ns, "namespace", "n", "", "namespace of the service (default: default)")
	wf.add(cmd)
	return cmd
}

// service is the Service the flags describe, through admission as an
// apply would be: its defaults written (as legion validate prints them),
// every problem named.
func (f serviceFlags) service(name, ns string, words []string, replicasSet bool) (*legion.Service, error) {
	if err := legion.ValidName(name); err != nil {
		return nil, fmt.Errorf("name %q: %w", name, err)
	}
	labels, err := keyValues("--label", f.labels)
	if err != nil {
		return nil, err
	}
	ctr, err := f.container(name, words)
	if err != nil {
		return nil, err
	}
	for _, r := range []struct {
		flag, value string
		cpu         *legion.CPU
		memory      *legion.Bytes
	}{
		{"--limit-cpu", f.limitCPU, &ctr.Resources.Limits.CPU, nil},
		{"--limit-memory", f.limitMemory, nil, &ctr.Resources.Limits.Memory},
		{"--reserve-cpu", f.reserveCPU, &ctr.Resources.Requests.CPU, nil},
		{"--reserve-memory", f.reserveMemory, nil, &ctr.Resources.Requests.Memory},
	} {
		if r.value == "" {
			continue
		}
		if r.cpu != nil {
			if *r.cpu, err = compose.DockerCPUs(r.value); err != nil {
				return nil, fmt.Errorf("%s %w", r.flag, err)
			}
			continue
		}
		if *r.memory, err = compose.DockerBytes(r.value); err != nil {
			return nil, fmt.Errorf("%s %w", r.flag, err)
		}
	}
	o, _ := legion.New(legion.KindService)
	s := o.(*legion.Service)
	s.Metadata = legion.Metadata{Name: name, Namespace: cmp.Or(ns, legion.DefaultNamespace), Labels: labels}
	// A target is one port of the service, its VIP port the target; one
	// published again, as Docker does, gets a VIP port of its own.
	addPorts := func(flag, p string, publish bool) error {
		ctrs, svcs, err := compose.Ports(p)
		if err != nil {
			return fmt.Errorf("%s %w", flag, err)
		}
		for _, sp := range svcs {
			if !publish && sp.PublishedPort != 0 {
				return fmt.Errorf("%s %q: a port to publish goes in --publish (-p)", flag, p)
			}
			all, err := compose.AddPort(s.Spec.Endpoint.Ports, sp)
			if err != nil {
				return fmt.Errorf("%s %q: %w", flag, p, err)
			}
			s.Spec.Endpoint.Ports = all
		}
		for _, cp := range ctrs {
			if !slices.ContainsFunc(ctr.Ports, func(have legion.ContainerPort) bool {
				return have.ContainerPort == cp.ContainerPort && have.Protocol == cp.Protocol
			}) {
				ctr.Ports = append(ctr.Ports, cp)
			}
		}
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
	s.Spec.Placement.Constraints = f.constraints
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
