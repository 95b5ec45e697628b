package agent

import (
	"fmt"
	"path"
	"strings"
	"syscall"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/jail"
)

// containerID names a task's container; the infra container is the task's
// uid itself.
func containerID(task *legion.Task, container string) string {
	return task.Metadata.UID + "-" + container
}

func labels(task *legion.Task, node, container string) map[string]string {
	return map[string]string{
		LabelTask: task.Metadata.UID, LabelNode: node, LabelContainer: container,
		LabelNamespace: task.Metadata.Namespace, LabelTaskName: task.Metadata.Name,
	}
}

// imageRef is the reference a task runs for a container's image: pinned
// to the digest the leader resolved when there is one.
func imageRef(task *legion.Task, ref string) string {
	d, ok := task.Spec.Images[ref]
	if !ok || d == "" || strings.Contains(ref, "@") {
		return ref
	}
	return ref + "@" + d
}

func pullPolicy(p legion.PullPolicy) image.PullPolicy {
	switch p {
	case legion.PullAlways:
		return image.Always
	case legion.PullNever:
		return image.Never
	}
	return image.IfNotPresent
}

// containerSpec builds what the runtime makes of one container of a pod:
// the image's defaults under the pod spec's, values of Secrets and Configs
// given as environment variables, and their files mounted read-only.
// The environment taken from Secrets and Configs is returned apart, for
// the caller to hand over in an environment file that stays in memory.
func containerSpec(task *legion.Task, node string, c *legion.Container, cfg *image.Config, root string, files map[string]string, values map[string][]byte, podEnv []string) (jail.ContainerSpec, []string, error) {
	ic := cfg.Config
	argv := ic.Entrypoint
	cmd := ic.Cmd
	if len(c.Command) > 0 {
		argv, cmd = c.Command, nil
	}
	if len(c.Args) > 0 {
		cmd = c.Args
	}
	argv = append(append([]string(nil), argv...), cmd...)
	if len(argv) == 0 {
		return jail.ContainerSpec{}, nil, permanentError("container " + c.Name + ": the image names no command and the pod gives none")
	}
	ns := task.Metadata.Namespace
	env := append([]string(nil), podEnv...)
	known := podVars(podEnv)
	var hidden []string // values of Secrets and Configs: kept off the runtime's records
	for _, e := range c.Env {
		v := e.Value
		switch {
		case e.Secret != "":
			val, ok := values[ValueKey(legion.KindSecret, ns, e.Secret)]
			if !ok {
				return jail.ContainerSpec{}, nil, fmt.Errorf("container %s: env %s: secret %s/%s not delivered to this node", c.Name, e.Name, ns, e.Secret)
			}
			v = string(val)
		case e.Config != "":
			val, ok := values[ValueKey(legion.KindConfig, ns, e.Config)]
			if !ok {
				return jail.ContainerSpec{}, nil, fmt.Errorf("container %s: env %s: config %s/%s not delivered to this node", c.Name, e.Name, ns, e.Config)
			}
			v = string(val)
		default:
			v = expand(v, known)
		}
		if e.Secret != "" || e.Config != "" {
			hidden = append(hidden, e.Name+"="+v)
		} else {
			env = append(env, e.Name+"="+v)
		}
		known[e.Name] = v
	}
	for i := range argv {
		argv[i] = expand(argv[i], known)
	}
	user := containerUser(c, cfg)
	wd := c.WorkingDir
	if wd == "" {
		wd = ic.WorkingDir
	}
	spec := jail.ContainerSpec{
		ID: containerID(task, c.Name), Pod: task.Metadata.UID,
		Labels: labels(task, node, c.Name), Image: c.Image,
		Command: argv, ImageEnv: ic.Env, Env: env, User: user, WorkDir: wd,
		Root: jail.Root{Path: root},
		Resources: jail.Resources{
			CPUMillis: c.Resources.Limits.CPU.Millis(), MemoryBytes: int64(c.Resources.Limits.Memory),
			MaxProc: int64(c.Resources.Limits.Maxproc), OpenFiles: int64(c.Resources.Limits.Openfiles),
		},
		Security: jail.Security{Allow: c.Security.Allow, Securelevel: c.Security.Securelevel, EnforceStatfs: c.Security.EnforceStatfs},
		// A Linux image (the store took it only on a node that runs them)
		// gets what Linux programs expect of /proc, /sys and /dev (6.6).
		Linux: cfg.OS == "linux",
	}
	if c.StopGracePeriod != nil {
		spec.StopGrace = c.StopGracePeriod.D()
	}
	sig := c.StopSignal
	if sig == "" {
		sig = ic.StopSignal
	}
	if sig != "" {
		s, ok := signalByName(sig)
		if !ok {
			return jail.ContainerSpec{}, nil, fmt.Errorf("container %s: stop signal %q unknown: expected a signal's name (SIGQUIT, SIGRTMIN+3) or a number FreeBSD and Linux give the same signal", c.Name, sig)
		}
		spec.StopSignal = s
	}
	for _, m := range c.VolumeMounts {
		src, ok := files["volume:"+m.Name]
		if !ok {
			return jail.ContainerSpec{}, nil, fmt.Errorf("container %s: volume %s is not ready on this node", c.Name, m.Name)
		}
		spec.Mounts = append(spec.Mounts, jail.Mount{Source: src, Target: m.Path, ReadOnly: m.ReadOnly, Kind: jail.MountNullfs})
	}
	for _, f := range c.Secrets {
		spec.Mounts = append(spec.Mounts, jail.Mount{Source: files["Secret/"+f.Name], Target: f.Target, ReadOnly: true, Kind: jail.MountNullfs})
	}
	for _, f := range c.Configs {
		spec.Mounts = append(spec.Mounts, jail.Mount{Source: files["Config/"+f.Name], Target: f.Target, ReadOnly: true, Kind: jail.MountNullfs})
	}
	if p, ok := files[ResolvConfKey]; ok && !mountsOver(spec.Mounts, "/etc/resolv.conf") {
		spec.Mounts = append(spec.Mounts, jail.Mount{Source: p, Target: "/etc/resolv.conf", ReadOnly: true, Kind: jail.MountNullfs})
	}
	return spec, hidden, nil
}

// containerUser is who a container runs as: its own user, else its
// image's.
func containerUser(c *legion.Container, cfg *image.Config) string {
	if c.User != "" {
		return c.User
	}
	return cfg.Config.User
}

// mountsOver reports whether a mount already covers target, which the
// user's own mount keeps.
func mountsOver(ms []jail.Mount, target string) bool {
	for _, m := range ms {
		if path.Clean(m.Target) == target || strings.HasPrefix(target, path.Clean(m.Target)+"/") {
			return true
		}
	}
	return false
}

// podVars is the pod's variables (NAME=value) by name, the first that
// $(NAME) in a container's command, args and env can read.
func podVars(podEnv []string) map[string]string {
	vars := map[string]string{}
	for _, kv := range podEnv {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return vars
}

// probeVars is what $(NAME) in a container's exec probes reads: the pod's
// variables, then the container's env given as values, each expanded as
// in the container's own env. Kubernetes expands a probe's command with
// the static env alone; values of Secrets and Configs stay out of it too
// here, as a probe's command is logged and reported when it fails.
func probeVars(podEnv []string, c *legion.Container) map[string]string {
	vars := podVars(podEnv)
	for _, e := range c.Env {
		if e.Secret == "" && e.Config == "" {
			vars[e.Name] = expand(e.Value, vars)
		}
	}
	return vars
}

// expandProbes is a container's probes with $(NAME) in their exec
// commands expanded from vars (probeVars), as the container's command is.
func expandProbes(p legion.Probes, vars map[string]string) legion.Probes {
	one := func(pr *legion.Probe) *legion.Probe {
		if pr == nil || pr.Exec == nil {
			return pr
		}
		out := *pr
		cmd := make([]string, len(pr.Exec.Command))
		for i, arg := range pr.Exec.Command {
			cmd[i] = expand(arg, vars)
		}
		out.Exec = &legion.ExecProbe{Command: cmd}
		return &out
	}
	return legion.Probes{Startup: one(p.Startup), Liveness: one(p.Liveness), Readiness: one(p.Readiness)}
}

// expand replaces $(NAME) with the value of a variable defined before it
// (the pod's LEGION_POD_IP and HOSTNAME, then the container's env in
// order), as Kubernetes does in command, args and env; $$(NAME) stays
// $(NAME), and unknown names are left as written.
func expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$(") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "$$("):
			b.WriteString("$(")
			i += 2
		case strings.HasPrefix(s[i:], "$("):
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// signalNumbers are the numbers, on the platform the agent runs on, of
// the stop signals admission accepts (legion.StopSignals): names are
// legion's, numbers differ between FreeBSD and Linux.
var signalNumbers = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT, "SIGKILL": syscall.SIGKILL,
	"SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2, "SIGTERM": syscall.SIGTERM, "SIGWINCH": syscall.SIGWINCH,
	"SIGSTOP": syscall.SIGSTOP,
}

// signalByName reads a stop signal as admission does; an image's may be
// written any way too.
func signalByName(s string) (syscall.Signal, bool) {
	name, ok := legion.ParseStopSignal(s)
	if !ok {
		return 0, false
	}
	if fromMin, n, ok := legion.RealtimeStopSignal(name); ok {
		if fromMin {
			return sigRTMin + syscall.Signal(n), true
		}
		return sigRTMax - syscall.Signal(n), true
	}
	sig, ok := signalNumbers[name]
	return sig, ok
}

// fileName is where a Secret's or Config's file lives in the task's
// private directory.
func fileName(dir string, kind legion.Kind, name string) string {
	return path.Join(dir, strings.ToLower(string(kind))+"s", name)
}
