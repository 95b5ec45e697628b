package compose

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/legionbsd/legion"
)

// Docker's healthcheck defaults: every 30 s, 30 s to answer, 3 failures.
const (
	dockerHealthInterval = 30 * time.Second
	dockerHealthTimeout  = 30 * time.Second
	dockerHealthRetries  = 3
)

// service converts one compose service to a Legion Service, or, in a
// job mode (deploy.mode replicated-job or global-job), to a Job.
func (c *converter) service(key string, s types.ServiceConfig, names *stackNames) (legion.Object, error) {
	p := "services." + key
	name := names.services[key]
	job := jobMode(s.Deploy)
	svc := &legion.Service{Header: c.header(legion.KindService, name, nil)}
	if strings.TrimSpace(s.Image) == "" {
		if s.Build != nil {
			return nil, fmt.Errorf("%s.image: missing: Legion deploys images and builds none; build this one (docker build -t registry.example/%s .), push it, and name it in image: beside build:", p, name)
		}
		return nil, fmt.Errorf("%s.image: missing: Legion deploys images and builds none", p)
	}
	ctr := legion.Container{Name: name, Image: s.Image, User: s.User, PullPolicy: c.pullPolicy(p+".pull_policy", s.PullPolicy)}
	if s.WorkingDir != "" {
		if strings.HasPrefix(s.WorkingDir, "/") {
			ctr.WorkingDir = s.WorkingDir
		} else {
			c.warn(p+".working_dir", "%q is not an absolute path, ignored", s.WorkingDir)
		}
	}
	if len(s.Entrypoint) > 0 {
		ctr.Command = slices.Clone([]string(s.Entrypoint))
	}
	if len(s.Command) > 0 {
		ctr.Args = slices.Clone([]string(s.Command))
	}
	env, err := c.environment(p, s)
	if err != nil {
		return nil, err
	}
	ctr.Env = env
	pod := &svc.Spec.Pod
	if job == "" {
		c.ports(p, s, &ctr, &svc.Spec.Endpoint)
	} else if err := c.jobPorts(p, s); err != nil {
		return nil, err
	}
	if err := c.volumes(p, s, &ctr, pod, names); err != nil {
		return nil, err
	}
	ctr.Secrets = c.fileRefs(p+".secrets", fileRefsOf(s.Secrets), names.secrets, "/run/secrets/")
	ctr.Configs = c.fileRefs(p+".configs", fileRefsOf(s.Configs), names.configs, "/")
	c.healthcheck(p+".healthcheck", s.HealthCheck, &ctr)
	if s.StopGracePeriod != nil {
		d := c.duration(p+".stop_grace_period", *s.StopGracePeriod)
		ctr.StopGracePeriod = &d
	}
	if s.StopSignal != "" {
		if validStopSignal(s.StopSignal) {
			ctr.StopSignal = s.StopSignal
		} else {
			c.warn(p+".stop_signal", "%q: not a signal Legion stops containers with, ignored", s.StopSignal)
		}
	}
	for i, cap := range s.CapAdd {
		switch strings.TrimPrefix(strings.ToUpper(cap), "CAP_") {
		case "NET_RAW":
			ctr.Security.Allow = []string{legion.AllowRawSockets}
		default:
			c.warn(fmt.Sprintf("%s.cap_add[%d]", p, i), "%s: not supported, ignored: only NET_RAW (raw sockets) has a jail equivalent", cap)
		}
	}
	if s.Hostname != "" {
		if legion.ValidName(s.Hostname) == nil {
			pod.Hostname = s.Hostname
		} else {
			c.warn(p+".hostname", "%q is not a DNS label, ignored", s.Hostname)
		}
	}
	pod.Containers = []legion.Container{ctr}
	labels, err := c.deploy(p+".deploy", s.Deploy, &svc.Spec)
	if err != nil {
		return nil, err
	}
	c.serviceLimits(p, s, &pod.Containers[0].Resources)
	if s.Scale != nil && svc.Spec.Replicas == nil && svc.Spec.Mode != legion.ModeGlobal && job == "" {
		// compose-go moves scale into deploy.replicas only when there
		// is a deploy section.
		if *s.Scale > legion.MaxReplicas {
			return nil, fmt.Errorf("%s.scale: %d is out of range: expected 0 to %d", p, *s.Scale, legion.MaxReplicas)
		}
		n := *s.Scale
		svc.Spec.Replicas = &n
	}
	c.restart(p+".restart", s.Restart, pod)
	if job != "" {
		return c.job(p, s, svc, labels, job)
	}
	svc.Spec.DependsOn = c.dependsOn(p+".depends_on", s.DependsOn, names)
	for net := range s.Networks {
		if l, ok := names.networks[net]; ok {
			labels[l] = "true"
		}
	}
	svc.Metadata.Labels = labels
	return svc, nil
}

// jobMode is the Job mode of a compose deploy mode, "" for a service's.
func jobMode(d *types.DeployConfig) legion.JobMode {
	if d == nil {
		return ""
	}
	switch d.Mode {
	case "replicated-job":
		return legion.JobReplicated
	case "global-job":
		return legion.JobGlobal
	}
	return ""
}

// jobPorts refuses what a job cannot have of ports: a Job has no
// endpoint, so nothing to publish or balance a port on.
func (c *converter) jobPorts(p string, s types.ServiceConfig) error {
	if len(s.Ports) > 0 {
		return fmt.Errorf("%s.ports: not allowed with deploy.mode %s: a Job has no endpoint to publish or balance ports on; remove ports, or deploy it as a service (replicated or global)", p, s.Deploy.Mode)
	}
	if len(s.Expose) > 0 {
		c.warn(p+".expose", "ignored: a Job has no endpoint, so other services reach no port of it by name")
	}
	return nil
}

// job makes the Job a compose service in a job mode is, from the Service
// converted as any other: its pod, placement and labels but the network
// memberships (policies select services). A replicated job's replicas
// are its completions, all run at once, as docker stack deploy sets max
// concurrent to replicas.
func (c *converter) job(p string, s types.ServiceConfig, svc *legion.Service, labels map[string]string, mode legion.JobMode) (*legion.Job, error) {
	j := &legion.Job{Header: c.header(legion.KindJob, svc.Metadata.Name, labels)}
	j.Spec = legion.JobSpec{Mode: mode, Pod: svc.Spec.Pod, Placement: svc.Spec.Placement}
	if mode == legion.JobReplicated {
		n := 1
		if svc.Spec.Replicas != nil {
			n = *svc.Spec.Replicas
		}
		if n < 1 {
			return nil, fmt.Errorf("%s.deploy.replicas: %d is out of range: a replicated-job runs 1 to %d tasks to completion", p, n, legion.MaxReplicas)
		}
		j.Spec.Completions, j.Spec.Parallelism = n, n
	}
	if rp := j.Spec.Pod.RestartPolicy; rp != nil && rp.Condition == legion.RestartAny {
		// Swarm restarts a job's task only on failure, whatever the policy.
		rp.Condition = legion.RestartOnFailure
		from := p + ".restart"
		if s.Deploy.RestartPolicy != nil {
			from = p + ".deploy.restart_policy.condition"
		}
		c.note(from, "on-failure for a job, as Swarm has it: a task that exited 0 is done, not restarted")
	}
	if len(s.DependsOn) > 0 {
		c.warn(p+".depends_on", "not supported for a job, ignored: its tasks start at once, and failed ones are retried up to its backoffLimit")
	}
	if c.segmented && len(s.Networks) > 0 {
		c.warn(p+".networks", "a Job's tasks are members of no network segment (policies select services): in a namespace with isolation: locked only what lets every task in is open to them")
	}
	return j, nil
}

// serviceLimits maps the resources docker compose takes outside deploy:
// cpus, mem_limit, mem_reservation and pids_limit (compose-go has checked
// that deploy.resources, if any, says the same), and the ulimits rctl
// has too: nofile as openfiles, nproc as maxproc (deploy's pids wins).
// rctl denies at one limit, so of a soft and a hard one the hard is kept.
func (c *converter) serviceLimits(p string, s types.ServiceConfig, res *legion.Resources) {
	l := &res.Limits
	if l.CPU == 0 {
		l.CPU = cpus(types.NanoCPUs(s.CPUS))
	}
	if l.Memory == 0 {
		l.Memory = legion.Bytes(max(s.MemLimit, 0))
	}
	if res.Requests.Memory == 0 {
		res.Requests.Memory = legion.Bytes(max(s.MemReservation, 0))
	}
	limit := func(path string, u *types.UlimitsConfig) int {
		if u.Single != 0 {
			return u.Single
		}
		if u.Soft != 0 && u.Soft != u.Hard {
			c.note(path, "soft limit %d not kept: rctl denies at one limit, the hard one (%d)", u.Soft, u.Hard)
		}
		return u.Hard
	}
	set := func(path, field string, to *int, n int) {
		switch {
		case n <= 0:
			c.warn(path, "%d: expected a positive limit, ignored", n)
		case *to != 0 && *to != n:
			c.note(path, "%d: ignored: %s is %d already (deploy.resources.limits.pids wins, then ulimits.nproc)", n, field, *to)
		default:
			*to = n
		}
	}
	for _, name := range sortedKeys(s.Ulimits) {
		path := p + ".ulimits." + name
		switch name {
		case "nofile":
			set(path, "openfiles", &l.Openfiles, limit(path, s.Ulimits[name]))
		case "nproc":
			set(path, "maxproc", &l.Maxproc, limit(path, s.Ulimits[name]))
		default:
			c.warn(path, "not supported, ignored: only nofile and nproc have rctl limits (openfiles, maxproc)")
		}
	}
	if s.PidsLimit != 0 {
		set(p+".pids_limit", "maxproc", &l.Maxproc, int(min(s.PidsLimit, math.MaxInt32)))
	}
}

// environment joins env_file entries (in order) and environment, which
// wins, sorted by name.
func (c *converter) environment(p string, s types.ServiceConfig) ([]legion.EnvVar, error) {
	vals := map[string]string{}
	lookup := func(k string) (string, bool) {
		v, ok := c.opts.Env[k]
		return v, ok
	}
	for i, f := range s.EnvFiles {
		fp := fmt.Sprintf("%s.env_file[%d]", p, i)
		if c.opts.ReadFile == nil {
			return nil, fmt.Errorf("%s: %s: reading files is not available here", fp, f.Path)
		}
		data, err := c.opts.ReadFile(f.Path)
		if err != nil {
			if !f.Required {
				continue // as compose does: the file is optional
			}
			return nil, fmt.Errorf("%s: %w", fp, err)
		}
		m, err := dotenv.UnmarshalBytesWithLookup(data, lookup)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", fp, f.Path, err)
		}
		for k, v := range m {
			vals[k] = v
		}
	}
	for k, v := range s.Environment {
		if v == nil {
			if val, ok := c.opts.Env[k]; ok {
				vals[k] = val
				continue
			}
			c.note(p+".environment."+k, "not set in the environment, left out")
			delete(vals, k)
			continue
		}
		vals[k] = *v
	}
	var out []legion.EnvVar
	for _, k := range sortedKeys(vals) {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			c.warn(p+".environment", "%q is not a variable name, left out", k)
			continue
		}
		if vals[k] == "" {
			// An empty value reads as unset in the native form (value is
			// omitted when empty), which admission accepts: the variable is
			// still set, empty.
			out = append(out, legion.EnvVar{Name: k})
			continue
		}
		out = append(out, legion.EnvVar{Name: k, Value: vals[k]})
	}
	return out, nil
}

// ports maps ports (each one a VIP port equal to its target, published
// when the file publishes it; a target published again gets a VIP port
// of its own, see AddPort) and expose (container ports, and VIP ports
// equal to them).
func (c *converter) ports(p string, s types.ServiceConfig, ctr *legion.Container, ep *legion.Endpoint) {
	have := map[string]bool{}
	addContainerPort := func(n int, proto legion.Protocol, name string) {
		key := fmt.Sprintf("%d/%s", n, proto)
		if have[key] {
			return
		}
		have[key] = true
		ctr.Ports = append(ctr.Ports, legion.ContainerPort{Name: name, ContainerPort: n, Protocol: proto})
	}
	for i, port := range s.Ports {
		pp := fmt.Sprintf("%s.ports[%d]", p, i)
		proto, ok := c.protocol(pp+".protocol", port.Protocol)
		if !ok {
			continue
		}
		if port.Target == 0 || port.Target > 65535 {
			c.warn(pp+".target", "%d is not a port, ignored", port.Target)
			continue
		}
		if port.HostIP != "" {
			c.warn(pp+".host_ip", "not supported, ignored: published ports listen on every address")
		}
		if port.AppProtocol != "" {
			c.warn(pp+".app_protocol", "not supported, ignored")
		}
		target := int(port.Target)
		published, mode := c.published(pp, port)
		var name string
		if port.Name != "" {
			n := dnsLabel(port.Name)
			if n == "" {
				c.warn(pp+".name", "%q cannot be made a DNS label, ignored", port.Name)
			} else {
				if n != port.Name {
					c.note(pp+".name", "name %q becomes %q (a DNS label)", port.Name, n)
				}
				name = n
			}
		}
		sp := legion.ServicePort{Name: name, Protocol: proto, Port: target, TargetPort: legion.PortRef{Number: target}}
		if published != 0 {
			sp.Publish, sp.PublishedPort = mode, published
		}
		addContainerPort(target, proto, name)
		all, err := AddPort(ep.Ports, sp)
		if err != nil {
			c.warn(pp, "%v: a container port only", err)
			continue
		}
		ep.Ports = all
	}
	for i, e := range s.Expose {
		xp := fmt.Sprintf("%s.expose[%d]", p, i)
		spec, protoText, _ := strings.Cut(e, "/")
		proto, ok := c.protocol(xp, protoText)
		if !ok {
			continue
		}
		lo, hi, err := portRange(spec)
		if err != nil {
			c.warn(xp, "%q: %v, ignored", e, err)
			continue
		}
		for n := lo; n <= hi; n++ {
			addContainerPort(n, proto, "")
			// A service port too, as on a compose network every port of
			// a container answers by its service's name.
			sp := legion.ServicePort{Protocol: proto, Port: n, TargetPort: legion.PortRef{Number: n}}
			if slices.ContainsFunc(ep.Ports, func(p legion.ServicePort) bool { return p.Protocol == proto && p.TargetPort == sp.TargetPort }) {
				continue
			}
			if len(ep.Ports) >= maxServicePorts {
				c.warn(xp, "%d/%s: a service has at most %d ports; a container port only", n, proto, maxServicePorts)
				continue
			}
			all, err := AddPort(ep.Ports, sp)
			if err != nil {
				c.warn(xp, "%v: a container port only", err)
				continue
			}
			ep.Ports = all
		}
	}
}

// published reads where a port is published: 0 when it is not.
func (c *converter) published(pp string, port types.ServicePortConfig) (int, legion.PublishMode) {
	if port.Published == "" {
		return 0, ""
	}
	pub, err := strconv.Atoi(port.Published)
	if err != nil || pub < 1 || pub > 65535 {
		c.warn(pp+".published", "%q: only a single port can be published, not published", port.Published)
		return 0, ""
	}
	switch port.Mode {
	case "", "ingress":
		return pub, legion.PublishIngress
	case "host":
		return pub, legion.PublishHost
	}
	c.warn(pp+".mode", "%q is not ingress or host, published in ingress mode", port.Mode)
	return pub, legion.PublishIngress
}

// maxExposeRange bounds the container ports one expose range makes.
const maxExposeRange = 1024

// maxServicePorts bounds the service ports expose adds.
const maxServicePorts = 64

func portRange(s string) (int, int, error) {
	loText, hiText, isRange := strings.Cut(s, "-")
	lo, err := strconv.Atoi(loText)
	if err != nil || lo < 1 || lo > 65535 {
		return 0, 0, fmt.Errorf("expected a port or a range of ports")
	}
	hi := lo
	if isRange {
		hi, err = strconv.Atoi(hiText)
		if err != nil || hi < lo || hi > 65535 {
			return 0, 0, fmt.Errorf("expected a port or a range of ports")
		}
	}
	if hi-lo >= maxExposeRange {
		return 0, 0, fmt.Errorf("a range of more than %d ports", maxExposeRange)
	}
	return lo, hi, nil
}

func (c *converter) protocol(p, proto string) (legion.Protocol, bool) {
	switch strings.ToLower(proto) {
	case "", "tcp":
		return legion.TCP, true
	case "udp":
		return legion.UDP, true
	}
	c.warn(p, "%q: only tcp and udp are supported, ignored", proto)
	return "", false
}

// volumes maps named volumes and tmpfs mounts; bind mounts and anonymous
// volumes have no Legion equivalent.
func (c *converter) volumes(p string, s types.ServiceConfig, ctr *legion.Container, pod *legion.PodSpec, names *stackNames) error {
	podVols := map[string]bool{}
	usedNames := map[string]bool{}
	targets := map[string]string{}
	mount := func(mp, name, target string, ro bool) {
		if other, dup := targets[target]; dup {
			c.warn(mp, "%s is already the target of %s, ignored", target, other)
			return
		}
		targets[target] = mp
		ctr.VolumeMounts = append(ctr.VolumeMounts, legion.VolumeMount{Name: name, Path: target, ReadOnly: ro})
	}
	tmpfs := func(mp, target string, size int64) {
		if !strings.HasPrefix(target, "/") {
			c.warn(mp, "%q: a tmpfs target must be an absolute path, ignored", target)
			return
		}
		if other, dup := targets[target]; dup {
			c.warn(mp, "%s is already the target of %s, ignored", target, other)
			return
		}
		name := uniqueName("tmpfs-"+dnsLabel(target), usedNames)
		pod.Volumes = append(pod.Volumes, legion.PodVolume{Name: name, Tmpfs: &legion.TmpfsVolume{Size: legion.Bytes(max(size, 0))}})
		mount(mp, name, target, false)
	}
	for i, v := range s.Volumes {
		vp := fmt.Sprintf("%s.volumes[%d]", p, i)
		switch v.Type {
		case types.VolumeTypeVolume:
			if v.Source == "" {
				c.warn(vp, "anonymous volume at %s: not supported, ignored (declare a named volume)", v.Target)
				continue
			}
			obj, ok := names.volumes[v.Source]
			if !ok {
				return fmt.Errorf("%s: volume %q is not declared under the top-level volumes", vp, v.Source)
			}
			if v.Volume != nil && (v.Volume.NoCopy || v.Volume.Subpath != "" || len(v.Volume.Labels) > 0) {
				c.warn(vp+".volume", "not supported, ignored")
			}
			if !strings.HasPrefix(v.Target, "/") {
				c.warn(vp, "%q: a mount target must be an absolute path, ignored", v.Target)
				continue
			}
			if !podVols[obj] {
				podVols[obj] = true
				usedNames[obj] = true
				pod.Volumes = append(pod.Volumes, legion.PodVolume{Name: obj, Volume: &legion.VolumeRef{Name: obj}})
			}
			mount(vp, obj, v.Target, v.ReadOnly)
		case types.VolumeTypeTmpfs:
			var size int64
			if v.Tmpfs != nil {
				size = int64(v.Tmpfs.Size)
				if v.Tmpfs.Mode != 0 {
					c.warn(vp+".tmpfs.mode", "not supported, ignored")
				}
			}
			tmpfs(vp, v.Target, size)
		case types.VolumeTypeBind:
			src, err := c.bindSource(vp+".source", v.Source)
			if err != nil {
				return err
			}
			if !strings.HasPrefix(v.Target, "/") {
				c.warn(vp, "%q: a mount target must be an absolute path, ignored", v.Target)
				continue
			}
			if b := v.Bind; b != nil && (b.Propagation != "" && b.Propagation != types.PropagationRPrivate || b.SELinux != "" || b.Recursive != "") {
				c.warn(vp+".bind", "propagation, selinux and recursive: not supported, ignored")
			}
			if src == "/" {
				c.warn(vp, "the node's root cannot be mounted into a container, ignored")
				continue
			}
			if !slices.Contains(c.hostPathServices, name0(p)) {
				c.hostPathServices = append(c.hostPathServices, name0(p))
			}
			name := uniqueName("host-"+dnsLabel(v.Target), usedNames)
			pod.Volumes = append(pod.Volumes, legion.PodVolume{Name: name, HostPath: &legion.HostPathVolume{Path: src}})
			mount(vp, name, v.Target, v.ReadOnly)
		default:
			c.warn(vp, "volume type %q: not supported, ignored", v.Type)
		}
	}
	for i, t := range s.Tmpfs {
		tp := fmt.Sprintf("%s.tmpfs[%d]", p, i)
		target, opts, _ := strings.Cut(t, ":")
		var size int64
		for _, o := range strings.Split(opts, ",") {
			if o == "" {
				continue
			}
			k, val, _ := strings.Cut(o, "=")
			if k == "size" {
				b, err := dockerBytes(val)
				if err != nil {
					c.warn(tp, "size %q: %v, ignored", val, err)
					continue
				}
				size = b
				continue
			}
			c.warn(tp, "option %q: not supported, ignored", o)
		}
		tmpfs(tp, target, size)
	}
	return nil
}

func uniqueName(base string, used map[string]bool) string {
	base = strings.TrimRight(base, "-")
	if len(base) > 56 {
		base = strings.TrimRight(base[:56], "-")
	}
	name := base
	for i := 2; used[name]; i++ {
		name = fmt.Sprintf("%s-%d", base, i)
	}
	used[name] = true
	return name
}

// dockerBytes reads a size as Docker does: k, m, g (with or without a
// trailing b, any case) are binary units, so 512m is 512Mi.
func dockerBytes(s string) (int64, error) {
	var b types.UnitBytes
	if err := b.DecodeMapstructure(s); err != nil {
		return 0, fmt.Errorf("expected a size such as 64m or 1g")
	}
	if b < 0 {
		return 0, fmt.Errorf("expected a size such as 64m or 1g")
	}
	return int64(b), nil
}

// fileRefsOf views a service's secrets or configs alike.
func fileRefsOf[T types.ServiceSecretConfig | types.ServiceConfigObjConfig](in []T) []types.FileReferenceConfig {
	out := make([]types.FileReferenceConfig, len(in))
	for i, r := range in {
		out[i] = types.FileReferenceConfig(r)
	}
	return out
}

// fileRefs maps secrets or configs of a service. Targets follow Swarm:
// a relative target (or none) sits under dir, /run/secrets/ for secrets
// and / for configs.
func (c *converter) fileRefs(p string, refs []types.FileReferenceConfig, objects map[string]string, dir string) []legion.FileRef {
	var out []legion.FileRef
	for i, r := range refs {
		rp := fmt.Sprintf("%s[%d]", p, i)
		obj, ok := objects[r.Source]
		if !ok {
			c.warn(rp, "%q is not declared at the top level, ignored", r.Source)
			continue
		}
		target := r.Target
		if target == "" {
			target = r.Source
		}
		if !strings.HasPrefix(target, "/") {
			target = dir + target
		}
		f := legion.FileRef{Name: obj, Target: target}
		if r.Mode != nil {
			if *r.Mode > 0 && *r.Mode <= 0o777 {
				f.Mode = int(*r.Mode)
			} else {
				c.warn(rp+".mode", "%#o: expected permission bits (0 to 0777), ignored", int64(*r.Mode))
			}
		}
		for _, id := range []struct {
			what, val string
			dst       *int
		}{{"uid", r.UID, &f.UID}, {"gid", r.GID, &f.GID}} {
			if id.val == "" {
				continue
			}
			n, err := strconv.Atoi(id.val)
			if err != nil || n < 0 {
				c.warn(rp+"."+id.what, "%q: expected a number, ignored", id.val)
				continue
			}
			*id.dst = n
		}
		out = append(out, f)
	}
	return out
}

// healthcheck becomes an exec probe used for liveness and, until x-legion
// says otherwise, readiness, with Docker's defaults.
func (c *converter) healthcheck(p string, h *types.HealthCheckConfig, ctr *legion.Container) {
	if h == nil || h.Disable || len(h.Test) == 0 {
		return
	}
	var cmd []string
	switch h.Test[0] {
	case "NONE":
		return
	case "CMD":
		cmd = slices.Clone(h.Test[1:])
	case "CMD-SHELL":
		if line := strings.TrimSpace(strings.Join(h.Test[1:], " ")); line != "" {
			cmd = []string{"/bin/sh", "-c", line}
		}
	default:
		// A list without CMD or CMD-SHELL is a command, as docker reads it.
		cmd = slices.Clone([]string(h.Test))
	}
	if len(cmd) == 0 {
		c.warn(p+".test", "no command, ignored")
		return
	}
	probe := legion.Probe{
		Exec:             &legion.ExecProbe{Command: cmd},
		Period:           legion.Duration(dockerHealthInterval),
		Timeout:          legion.Duration(dockerHealthTimeout),
		FailureThreshold: dockerHealthRetries,
		SuccessThreshold: 1,
	}
	if h.Interval != nil && *h.Interval > 0 {
		probe.Period = c.duration(p+".interval", *h.Interval)
	}
	if h.Timeout != nil && *h.Timeout > 0 {
		probe.Timeout = c.duration(p+".timeout", *h.Timeout)
	}
	if h.Retries != nil && *h.Retries > 0 {
		probe.FailureThreshold = int(min(*h.Retries, 1000))
	}
	if h.StartPeriod != nil {
		probe.InitialDelay = c.duration(p+".start_period", *h.StartPeriod)
	}
	var startup *legion.Probe
	if h.StartInterval != nil && *h.StartInterval > 0 {
		// Checks every start_interval through start_period, as Docker
		// does: a startup probe, which the others wait for.
		if probe.InitialDelay == 0 {
			c.warn(p+".start_interval", "ignored: it applies during start_period, which is not set")
		} else {
			s := probe
			s.Exec = &legion.ExecProbe{Command: slices.Clone(cmd)}
			s.Period = c.duration(p+".start_interval", *h.StartInterval)
			if s.Period > 0 {
				s.FailureThreshold = int(min((probe.InitialDelay.D()+s.Period.D()-1)/s.Period.D(), 1000)) + probe.FailureThreshold
				s.InitialDelay = 0
				probe.InitialDelay = 0
				startup = &s
			}
		}
	}
	live, ready := probe, probe
	live.Exec = &legion.ExecProbe{Command: slices.Clone(cmd)}
	ctr.Probes.Liveness, ctr.Probes.Readiness, ctr.Probes.Startup = &live, &ready, startup
}

// duration converts a compose duration, which may be finer than the
// millisecond Legion keeps, or negative.
func (c *converter) duration(p string, d types.Duration) legion.Duration {
	v := time.Duration(d)
	if v < 0 {
		c.note(p, "%s is negative, taken as 0s", v)
		return 0
	}
	if v%time.Millisecond != 0 {
		c.note(p, "%s is finer than a millisecond, rounded down", v)
		v = v.Truncate(time.Millisecond)
	}
	return legion.Duration(v)
}

// deploy maps the deploy section onto the service spec and returns the
// Service's labels.
func (c *converter) deploy(p string, d *types.DeployConfig, spec *legion.ServiceSpec) (map[string]string, error) {
	labels := map[string]string{}
	if d != nil {
		for _, k := range sortedKeys(d.Labels) {
			if k == StackLabel {
				c.warn(p+".labels."+k, "set by Legion to the stack's name, ignored")
				continue
			}
			if err := validLabel(k, d.Labels[k]); err != nil {
				c.warn(p+".labels."+k, "%v, ignored", err)
				continue
			}
			labels[k] = d.Labels[k]
		}
	}
	labels[StackLabel] = c.opts.Stack
	if d == nil {
		return labels, nil
	}
	job := jobMode(d) != ""
	switch d.Mode {
	case "", "replicated", "replicated-job":
		// A job's replicas are its completions (see job).
		spec.Mode = legion.ModeReplicated
		if d.Replicas != nil {
			if *d.Replicas < 0 || *d.Replicas > legion.MaxReplicas {
				return nil, fmt.Errorf("%s.replicas: %d is out of range: expected 0 to %d", p, *d.Replicas, legion.MaxReplicas)
			}
			n := *d.Replicas
			spec.Replicas = &n
		}
	case "global", "global-job":
		spec.Mode = legion.ModeGlobal
		if d.Replicas != nil {
			what := "global service"
			if job {
				what = "global job"
			}
			c.warn(p+".replicas", "ignored: a %s runs one task per eligible node", what)
		}
	default:
		return nil, fmt.Errorf("%s.mode: %q is not supported: expected replicated, global, replicated-job or global-job", p, d.Mode)
	}
	switch {
	case job && d.EndpointMode != "":
		c.warn(p+".endpoint_mode", "ignored: a Job has no endpoint")
	case d.EndpointMode == "", d.EndpointMode == "vip":
		spec.Endpoint.Mode = legion.EndpointVIP
	case d.EndpointMode == "dnsrr":
		spec.Endpoint.Mode = legion.EndpointDNSRR
	default:
		c.warn(p+".endpoint_mode", "%q is not vip or dnsrr, vip used", d.EndpointMode)
	}
	c.placement(p+".placement", d.Placement, &spec.Placement)
	if d.Placement.MaxReplicas != 0 {
		c.warn(p+".placement.max_replicas_per_node", "not supported, ignored")
	}
	res := &spec.Pod.Containers[0].Resources
	if l := d.Resources.Limits; l != nil {
		res.Limits.CPU = cpus(l.NanoCPUs)
		res.Limits.Memory = legion.Bytes(max(l.MemoryBytes, 0))
		if l.Pids > 0 {
			res.Limits.Maxproc = int(min(l.Pids, math.MaxInt32))
		}
	}
	if r := d.Resources.Reservations; r != nil {
		res.Requests.CPU = cpus(r.NanoCPUs)
		res.Requests.Memory = legion.Bytes(max(r.MemoryBytes, 0))
	}
	if rp := d.RestartPolicy; rp != nil {
		pol := &legion.RestartPolicy{}
		switch rp.Condition {
		case "", "any":
			pol.Condition = legion.RestartAny
		case "on-failure":
			pol.Condition = legion.RestartOnFailure
		case "none":
			pol.Condition = legion.RestartNone
		default:
			c.warn(p+".restart_policy.condition", "%q is not none, on-failure or any; any used", rp.Condition)
			pol.Condition = legion.RestartAny
		}
		if rp.MaxAttempts != nil {
			pol.MaxAttempts = int(min(*rp.MaxAttempts, math.MaxInt32))
		}
		if rp.Delay != nil {
			pol.Delay = c.duration(p+".restart_policy.delay", *rp.Delay)
		}
		if rp.Window != nil {
			c.warn(p+".restart_policy.window", "not supported, ignored")
		}
		spec.Pod.RestartPolicy = pol
	}
	if u := d.UpdateConfig; u != nil && job {
		c.warn(p+".update_config", "ignored: a Job has no rolling update")
	} else if u != nil {
		up := &spec.Update
		if u.Parallelism != nil {
			n := int(min(*u.Parallelism, legion.MaxReplicas))
			up.Parallelism = &n
		}
		up.Delay = c.duration(p+".update_config.delay", u.Delay)
		if u.Monitor != 0 {
			m := c.duration(p+".update_config.monitor", u.Monitor)
			up.Monitor = &m
		}
		switch u.FailureAction {
		case "":
		case "pause", "continue", "rollback":
			up.FailureAction = legion.FailureAction(u.FailureAction)
		default:
			c.warn(p+".update_config.failure_action", "%q is not pause, continue or rollback; pause used", u.FailureAction)
		}
		switch u.Order {
		case "":
		case "stop-first", "start-first":
			up.Order = legion.UpdateOrder(u.Order)
		default:
			c.warn(p+".update_config.order", "%q is not stop-first or start-first; stop-first used", u.Order)
		}
		if u.MaxFailureRatio != 0 {
			c.warn(p+".update_config.max_failure_ratio", "not supported, ignored")
		}
	}
	return labels, nil
}

// cpus converts Docker's fractional CPUs to millicores.
func cpus(n types.NanoCPUs) legion.CPU {
	v := float64(n)
	if v <= 0 || math.IsNaN(v) {
		return 0
	}
	return legion.CPU(math.Round(min(v, 1e9) * 1000))
}

// nodeArches maps the architectures Swarm's docs and nodes name (uname
// -m's) to the Go names a Legion node reports as node.platform.arch
// (runtime.GOARCH, a FreeBSD port of Go's), and those to themselves.
var nodeArches = map[string]string{
	"x86_64": "amd64", "aarch64": "arm64",
	"amd64": "amd64", "arm64": "arm64", "386": "386", "arm": "arm",
}

// placement keeps the constraints Legion can evaluate. Swarm's
// node.platform.os == linux is Legion's node.platform.linux == true, as
// Legion nodes run FreeBSD and Linux images run under its Linux ABI; its
// node.platform.arch values are uname's (x86_64), Legion's Go's (amd64).
func (c *converter) placement(p string, pl types.Placement, out *legion.Placement) {
	for i, s := range pl.Constraints {
		cp := fmt.Sprintf("%s.constraints[%d]", p, i)
		con, err := legion.ParseConstraint(s)
		if err == nil && con.Attr == "node.platform.os" && strings.EqualFold(con.Value, "linux") {
			repl := "node.platform.linux == true"
			if !con.Equal {
				repl = "node.platform.linux == false"
			}
			c.note(cp, "%q becomes %q: Legion nodes run FreeBSD and Linux images run under its Linux ABI", s, repl)
			out.Constraints = append(out.Constraints, repl)
			continue
		}
		if err != nil {
			c.warn(cp, "%v; ignored", err)
			continue
		}
		if con.Attr == "node.platform.arch" {
			if arch, ok := nodeArches[strings.ToLower(con.Value)]; !ok {
				// Kept, as Swarm keeps a constraint no node meets.
				c.warn(cp, "%q: %s is not an architecture a Legion node reports (amd64, arm64, 386 or arm; x86_64 and aarch64 are read as amd64 and arm64): kept as written",
					s, con.Value)
			} else if arch != con.Value {
				con.Value = arch
				c.note(cp, "%q becomes %q: Legion nodes report Go's architecture names", s, con.String())
			}
		}
		out.Constraints = append(out.Constraints, con.String())
	}
	for i, pref := range pl.Preferences {
		pp := fmt.Sprintf("%s.preferences[%d].spread", p, i)
		key, ok := strings.CutPrefix(strings.TrimSpace(pref.Spread), "node.labels.")
		if !ok || validLabel(key, "") != nil {
			c.warn(pp, "%q: expected node.labels.<key>, ignored", pref.Spread)
			continue
		}
		out.Preferences = append(out.Preferences, legion.Preference{Spread: "node.labels." + key})
	}
}

// validStopSignal checks a stop signal as admission will, on a throwaway
// Service (the model keeps its signal list to itself).
func validStopSignal(sig string) bool {
	svc := &legion.Service{Header: legion.Header{Kind: legion.KindService, Metadata: legion.Metadata{Name: "x"}}}
	svc.Spec.Pod.Containers = []legion.Container{{Name: "x", Image: "x", StopSignal: sig}}
	return legion.Admit(svc) == nil
}

// validLabel checks a label as admission will, by admitting a throwaway
// object carrying it (the model keeps its label rules to itself).
func validLabel(k, v string) error {
	probe := &legion.Secret{Header: legion.Header{Kind: legion.KindSecret, Metadata: legion.Metadata{Name: "x", Labels: map[string]string{k: v}}}, Spec: legion.SecretSpec{Text: "x"}}
	if err := legion.Admit(probe); err != nil {
		msg := err.Error()
		if _, after, ok := strings.Cut(msg, ": "); ok {
			msg = after
		}
		return fmt.Errorf("%s", msg)
	}
	return nil
}

// pullPolicy maps compose's pull_policy: always and never as they are,
// missing (and its older spelling if_not_present) as if-not-present, and
// refresh, which checks the registry at each start, as always. Legion
// builds nothing and has no timed pulls (daily, weekly, every_<d>): those
// are warned of and the default (if-not-present) kept.
func (c *converter) pullPolicy(p, v string) legion.PullPolicy {
	switch v {
	case "":
		return ""
	case types.PullPolicyAlways, types.PullPolicyRefresh:
		return legion.PullAlways
	case types.PullPolicyNever:
		return legion.PullNever
	case types.PullPolicyMissing, types.PullPolicyIfNotPresent:
		return legion.PullIfNotPresent
	case types.PullPolicyBuild:
		c.warn(p, "build: Legion builds no image; it is pulled when missing")
	default:
		c.warn(p, "%q: Legion pulls at start only (always, missing, never); pulled when missing", v)
	}
	return ""
}
