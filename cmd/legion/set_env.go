package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

// envChanges are set env's edits, in the order given: a variable set to
// a value, to a Secret's or Config's, or removed.
type envChanges struct {
	set    []legion.EnvVar
	remove []string
}

// setEnvCommand is kubectl set env, and docker service update --env-add
// and --env-rm: a workload's environment changed without its manifest.
func (c *clusterCLI) setEnvCommand() *cobra.Command {
	var ns, container, from string
	var secrets, configs []string
	var list bool
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "env SERVICE|KIND/NAME KEY=VALUE... KEY-...",
		Short: "Set or remove containers' environment variables, as kubectl set env does",
		Long: `Set env changes the environment of a service's containers (or KIND/NAME:
service/web, cronjob/nightly, job/migrate): KEY=VALUE sets a value,
--secret KEY=SECRET and --config KEY=CONFIG set one from a Secret or a
Config of the namespace, and KEY- removes one; -c names the container (by
default every container, init containers too). --list prints the
environment instead. For a service it starts a rolling update, as any
change to its pod does; --wait follows it. The manifest is not changed:
applied again, its environment comes back.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("set env: %w", err)
			}
			if from != "" {
				return fmt.Errorf("set env: --from %s: a Legion Secret or Config holds one value, not keys to import: give each variable as --secret KEY=SECRET or --config KEY=CONFIG", from)
			}
			kind, name, err := workloadArg(args[0])
			if err != nil {
				return fmt.Errorf("set env: %w", err)
			}
			if list {
				if len(args) > 1 || len(secrets) > 0 || len(configs) > 0 {
					return fmt.Errorf("set env: --list prints the environment: give the workload alone")
				}
				return c.listEnv(cmd, kind, ns, name, container)
			}
			ec, err := parseEnvChanges(args[1:], secrets, configs)
			if err != nil {
				return fmt.Errorf("set env: %w", err)
			}
			return c.changePod(cmd, podChange{what: "env", held: "this environment"}, kind, ns, name, wf, func(pod *legion.PodSpec) error {
				return setEnv(pod, container, ec)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", "", "namespace of the workload (default: default)")
	f.StringVarP(&container, "container", "c", "", "the container to change (default: every container)")
	f.StringArrayVar(&secrets, "secret", nil, "KEY=SECRET: the variable's value is the Secret's (repeatable)")
	f.StringArrayVar(&configs, "config", nil, "KEY=CONFIG: the variable's value is the Config's (repeatable)")
	f.StringVar(&from, "from", "", "refused: kubectl's import of every key of a Secret or ConfigMap; a Legion one holds one value")
	f.BoolVar(&list, "list", false, "print the containers' environment and change nothing")
	wf.add(cmd)
	return cmd
}

// parseEnvChanges reads KEY=VALUE and KEY- arguments and the --secret and
// --config flags; a variable given twice is refused.
func parseEnvChanges(args, secrets, configs []string) (envChanges, error) {
	var ec envChanges
	seen := map[string]bool{}
	add := func(name string) error {
		if seen[name] {
			return fmt.Errorf("variable %s is given twice", name)
		}
		seen[name] = true
		return nil
	}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		switch {
		case ok && k != "":
			if err := add(k); err != nil {
				return ec, err
			}
			ec.set = append(ec.set, legion.EnvVar{Name: k, Value: v})
		case !ok && len(a) > 1 && strings.HasSuffix(a, "-"):
			k = strings.TrimSuffix(a, "-")
			if err := add(k); err != nil {
				return ec, err
			}
			ec.remove = append(ec.remove, k)
		default:
			return ec, fmt.Errorf("%q: expected KEY=VALUE to set a variable or KEY- to remove it", a)
		}
	}
	for _, src := range []struct {
		flag string
		vals []string
	}{{"--secret", secrets}, {"--config", configs}} {
		for _, a := range src.vals {
			k, obj, ok := strings.Cut(a, "=")
			if !ok || k == "" || obj == "" {
				return ec, fmt.Errorf("%s %q: expected KEY=NAME, the variable and the object holding its value", src.flag, a)
			}
			if err := add(k); err != nil {
				return ec, err
			}
			v := legion.EnvVar{Name: k, Secret: obj}
			if src.flag == "--config" {
				v = legion.EnvVar{Name: k, Config: obj}
			}
			ec.set = append(ec.set, v)
		}
	}
	if len(ec.set) == 0 && len(ec.remove) == 0 {
		return ec, fmt.Errorf("nothing to change: give KEY=VALUE, KEY-, --secret KEY=SECRET or --config KEY=CONFIG (or --list)")
	}
	return ec, nil
}

// setEnv applies ec to the pod's containers, or to the one named: a
// variable set replaces one of its name where it is, or is added last.
// A container the pod lacks is refused, naming those it has.
func setEnv(pod *legion.PodSpec, container string, ec envChanges) error {
	ctrs, err := podContainers(pod, container)
	if err != nil {
		return err
	}
	for _, c := range ctrs {
		c.Env = slices.DeleteFunc(c.Env, func(e legion.EnvVar) bool { return slices.Contains(ec.remove, e.Name) })
		for _, v := range ec.set {
			if j := slices.IndexFunc(c.Env, func(e legion.EnvVar) bool { return e.Name == v.Name }); j >= 0 {
				c.Env[j] = v
			} else {
				c.Env = append(c.Env, v)
			}
		}
	}
	return nil
}

// listEnv prints the environment of the workload's containers, as kubectl
// set env --list does: a comment line per container, then KEY=VALUE, or
// where a value comes from a Secret or Config, that.
func (c *clusterCLI) listEnv(cmd *cobra.Command, kind legion.Kind, ns, name, container string) error {
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	o, err := cl.Get(ctxOf(cmd), kind, ns, name)
	if err != nil {
		return fmt.Errorf("set env: %w", err)
	}
	return printEnv(cmd.OutOrStdout(), o, container)
}

func printEnv(out io.Writer, o legion.Object, container string) error {
	ctrs, err := podContainers(legion.PodOf(o), container)
	if err != nil {
		return fmt.Errorf("set env: %w", err)
	}
	for _, c := range ctrs {
		fmt.Fprintf(out, "# %s, container %s\n", ref(o), c.Name)
		for _, e := range c.Env {
			switch {
			case e.Secret != "":
				fmt.Fprintf(out, "# %s from secret %s\n", e.Name, e.Secret)
			case e.Config != "":
				fmt.Fprintf(out, "# %s from config %s\n", e.Name, e.Config)
			default:
				fmt.Fprintf(out, "%s=%s\n", e.Name, e.Value)
			}
		}
	}
	return nil
}

// podContainers are the pod's containers, init containers first, or the
// one named; a name the pod has no container of is refused, naming those
// it has.
func podContainers(pod *legion.PodSpec, name string) ([]*legion.Container, error) {
	all := pod.AllContainers()
	if name == "" || name == "*" { // kubectl's -c '*', its default
		return all, nil
	}
	for _, c := range all {
		if c.Name == name {
			return []*legion.Container{c}, nil
		}
	}
	return nil, noContainer(pod, name)
}

// noContainer refuses a container name the pod does not have.
func noContainer(pod *legion.PodSpec, name string) error {
	return fmt.Errorf("no container named %s: the pod has %s", name, strings.Join(podContainerNames(pod), ", "))
}

// podContainerNames are the pod's containers' names, init containers
// first.
func podContainerNames(pod *legion.PodSpec) []string {
	var out []string
	for _, c := range pod.AllContainers() {
		out = append(out, c.Name)
	}
	return out
}
