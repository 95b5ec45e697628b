package legion

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"
)

// Limits admission holds objects to.
const (
	MaxReplicas      = 65536 // replicas, completions, parallelism, autoscale.max
	DefaultStopGrace = Duration(10 * time.Second)
	DefaultMonitor   = Duration(5 * time.Second)
	DefaultDownDelay = Duration(5 * time.Minute)
	DefaultBackoff   = 6
)

// Admit runs an object as a user wrote it through admission: it writes
// every default out, puts quantities, durations and constraints in
// canonical form, and checks everything the object can say about itself.
// It changes o in place and returns an ErrorList naming each problem by
// its field path. Server-set metadata (uid, version, generation) and any
// status are dropped: users write neither. Tasks are refused.
func Admit(o Object) error {
	var errs ErrorList
	admitMetadata(o, &errs)
	switch o := o.(type) {
	case *Service:
		o.Status = ServiceStatus{}
		admitService(&o.Spec, &errs)
		admitDependsOn(o.Metadata.Name, o.Spec.DependsOn, &errs)
	case *Job:
		o.Status = JobStatus{}
		admitJob(&o.Spec, "spec", &errs)
	case *CronJob:
		o.Status = CronJobStatus{}
		admitCronJob(o, &errs)
	case *Secret:
		admitValue(&o.Spec, &errs)
	case *Config:
		admitValue(&o.Spec, &errs)
	case *Volume:
		o.Status = VolumeStatus{}
		admitVolume(&o.Spec, &errs)
	case *Namespace:
		o.Status = NamespaceStatus{}
		admitNamespace(o, &errs)
	case *Node:
		o.Status = NodeStatus{}
		admitNode(&o.Spec, &errs)
	case *NetworkPolicy:
		admitNetworkPolicy(&o.Spec, &errs)
	case *Route:
		o.Status = RouteStatus{}
		admitRoute(&o.Spec, &errs)
	case *RoleBinding:
		admitRoleBinding(&o.Spec, &errs)
	case *ImagePolicy:
		admitImagePolicy(&o.Spec, &errs)
	case *Task:
		errs.add("kind", "Task objects are written by Legion only")
	default:
		errs.add("kind", "unknown kind %q", o.GetKind())
	}
	if len(errs) == 0 {
		admitSize(o, &errs)
	}
	return errs.Err()
}

func admitMetadata(o Object, errs *ErrorList) {
	m := o.GetMetadata()
	h := headerOf(o)
	h.APIVersion = APIVersion
	m.UID, m.Version, m.Generation = "", 0, 0
	if err := ValidName(m.Name); err != nil {
		errs.add("metadata.name", "%v", err)
	}
	if o.GetKind().Namespaced() {
		if m.Namespace == "" {
			m.Namespace = DefaultNamespace
		}
		if err := ValidName(m.Namespace); err != nil {
			errs.add("metadata.namespace", "%v", err)
		}
	} else if m.Namespace != "" {
		errs.add("metadata.namespace", "%s is cluster-scoped and has no namespace, got %q", o.GetKind(), m.Namespace)
	}
	validLabels(m.Labels, "metadata.labels", errs)
	if len(m.Labels) == 0 {
		m.Labels = nil
	}
}

func validLabels(labels map[string]string, p string, errs *ErrorList) {
	if !withinCount(len(labels), MaxLabels, p, "labels", errs) {
		return
	}
	for _, k := range sortedKeys(labels) {
		if err := validLabelKey(k); err != nil {
			errs.add(field(p, k), "invalid label key %v", err)
		}
		if err := validLabelValue(labels[k]); err != nil {
			errs.add(field(p, k), "invalid label value %v", err)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func checkCount(v int, p string, min, max int, errs *ErrorList) {
	if v < min || v > max {
		errs.add(p, "%d is out of range: expected %d to %d", v, min, max)
	}
}

func oneOf[T ~string](v *T, p string, def T, allowed []T, errs *ErrorList) {
	if *v == "" {
		*v = def
		return
	}
	if !slices.Contains(allowed, *v) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		errs.add(p, "%q is not valid: expected one of %s", *v, strings.Join(names, ", "))
	}
}

func intPtr(v int) *int           { return &v }
func durPtr(v Duration) *Duration { return &v }
func defaultInt(p **int, v int) {
	if *p == nil {
		*p = intPtr(v)
	}
}
func defaultDur(p **Duration, v Duration) {
	if *p == nil {
		*p = durPtr(v)
	}
}

// --- Services -------------------------------------------------------------

func admitService(s *ServiceSpec, errs *ErrorList) {
	oneOf(&s.Mode, "spec.mode", ModeReplicated, []ServiceMode{ModeReplicated, ModeGlobal, ModeStateful}, errs)
	switch {
	case s.Mode == ModeGlobal && s.Replicas != nil:
		errs.add("spec.replicas", "not allowed for a global service, which runs one task per eligible node")
	case s.Mode != ModeGlobal && s.Replicas == nil:
		n := 1
		if s.Autoscale != nil && s.Autoscale.Min > 0 {
			n = s.Autoscale.Min
		}
		s.Replicas = &n
	}
	if s.Replicas != nil {
		checkCount(*s.Replicas, "spec.replicas", 0, MaxReplicas, errs)
	}
	podCtx := podContext{stateful: s.Mode == ModeStateful, defaultRestart: RestartAny}
	admitPod(&s.Pod, "spec.pod", podCtx, errs)
	admitPlacement(&s.Placement, "spec.placement", errs)
	admitEndpoint(&s.Endpoint, &s.Pod, errs)
	admitUpdate(&s.Update, s.Mode, errs)
	if s.Autoscale != nil {
		admitAutoscale(s, errs)
	}
}

func admitUpdate(u *UpdateConfig, mode ServiceMode, errs *ErrorList) {
	defaultInt(&u.Parallelism, 1)
	checkCount(*u.Parallelism, "spec.update.parallelism", 0, MaxReplicas, errs)
	oneOf(&u.Order, "spec.update.order", StopFirst, []UpdateOrder{StopFirst, StartFirst}, errs)
	oneOf(&u.FailureAction, "spec.update.failureAction", FailurePause, []FailureAction{FailurePause, FailureContinue, FailureRollback}, errs)
	defaultDur(&u.Monitor, DefaultMonitor)
	if u.MaxUnavailable != nil {
		checkCount(*u.MaxUnavailable, "spec.update.maxUnavailable", 0, MaxReplicas, errs)
	}
	if mode == ModeStateful && u.Order == StartFirst {
		errs.add("spec.update.order", "start-first is refused for a stateful service: an ordinal's old task must stop before its replacement uses its volumes")
	}
	if u.Snapshot && mode != ModeStateful {
		errs.add("spec.update.snapshot", "only a stateful service snapshots its claimed volumes")
	}
}

func admitAutoscale(s *ServiceSpec, errs *ErrorList) {
	a := s.Autoscale
	const p = "spec.autoscale"
	if s.Mode != ModeReplicated {
		errs.add(p, "only a replicated service autoscales, this one is %s", s.Mode)
	}
	if a.CPU == 0 && a.Memory == 0 {
		errs.add(p, "needs a target: cpu or memory, as a percentage of the containers' requests")
	}
	if a.CPU < 0 || a.CPU > 1000 {
		errs.add(p+".cpu", "%d is out of range: expected a percentage from 1 to 1000", a.CPU)
	}
	if a.Memory < 0 || a.Memory > 1000 {
		errs.add(p+".memory", "%d is out of range: expected a percentage from 1 to 1000", a.Memory)
	}
	if a.Min < 1 {
		errs.add(p+".min", "%d is out of range: expected at least 1", a.Min)
	}
	if a.Max > MaxReplicas {
		errs.add(p+".max", "%d is out of range: at most %d", a.Max, MaxReplicas)
	}
	if a.Max < a.Min {
		errs.add(p+".max", "%d is below min %d", a.Max, a.Min)
	}
	if s.Replicas != nil && (*s.Replicas < a.Min || *s.Replicas > a.Max) {
		errs.add("spec.replicas", "%d is outside autoscale's %d to %d", *s.Replicas, a.Min, a.Max)
	}
	defaultDur(&a.DownDelay, DefaultDownDelay)
	for i, c := range s.Pod.Containers {
		cp := index("spec.pod.containers", i)
		if a.CPU > 0 && c.Resources.Requests.CPU == 0 {
			errs.add(cp+".resources.requests.cpu", "missing: autoscale's cpu target is a percentage of it")
		}
		if a.Memory > 0 && c.Resources.Requests.Memory == 0 {
			errs.add(cp+".resources.requests.memory", "missing: autoscale's memory target is a percentage of it")
		}
	}
}

func admitEndpoint(e *Endpoint, pod *PodSpec, errs *ErrorList) {
	const p = "spec.endpoint"
	oneOf(&e.Mode, p+".mode", EndpointVIP, []EndpointMode{EndpointVIP, EndpointDNSRR}, errs)
	names := map[string]int{}
	ports := map[string]int{}
	published := map[string]int{}
	if !withinCount(len(e.Ports), MaxPorts, p+".ports", "ports", errs) {
		return
	}
	for i := range e.Ports {
		sp := &e.Ports[i]
		pp := index(p+".ports", i)
		if sp.Name != "" {
			if err := ValidName(sp.Name); err != nil {
				errs.add(pp+".name", "%v", err)
			} else if j, dup := names[sp.Name]; dup {
				errs.add(pp+".name", "%q is already the name of ports[%d]", sp.Name, j)
			}
			names[sp.Name] = i
		}
		oneOf(&sp.Protocol, pp+".protocol", TCP, []Protocol{TCP, UDP}, errs)
		if sp.Port == 0 {
			errs.add(pp+".port", "missing")
		} else {
			checkCount(sp.Port, pp+".port", 1, 65535, errs)
			key := fmt.Sprintf("%d/%s", sp.Port, sp.Protocol)
			if j, dup := ports[key]; dup {
				errs.add(pp+".port", "%s is already ports[%d]", key, j)
			}
			ports[key] = i
		}
		if sp.TargetPort.IsZero() {
			sp.TargetPort = PortRef{Number: sp.Port}
		}
		if sp.TargetPort.Name != "" {
			cp, ok := pod.FindPort(sp.TargetPort)
			if !ok {
				errs.add(pp+".targetPort", "%q names no container port of the pod", sp.TargetPort.Name)
			} else if cp.Protocol != "" && cp.Protocol != sp.Protocol {
				errs.add(pp+".targetPort", "%q is a %s port, the service port is %s", sp.TargetPort.Name, cp.Protocol, sp.Protocol)
			}
		} else if sp.TargetPort.Number != 0 {
			checkCount(sp.TargetPort.Number, pp+".targetPort", 1, 65535, errs)
		}
		switch sp.Publish {
		case "":
			if sp.PublishedPort != 0 {
				errs.add(pp+".publishedPort", "set without publish: expected publish: ingress or host")
			}
		case PublishIngress, PublishHost:
			if sp.PublishedPort == 0 {
				sp.PublishedPort = sp.Port
			}
			checkCount(sp.PublishedPort, pp+".publishedPort", 1, 65535, errs)
			key := fmt.Sprintf("%d/%s", sp.PublishedPort, sp.Protocol)
			if j, dup := published[key]; dup {
				errs.add(pp+".publishedPort", "%s is already published by ports[%d]", key, j)
			}
			published[key] = i
			if sp.Publish == PublishIngress && e.Mode == EndpointDNSRR {
				errs.add(pp+".publish", "ingress publishing needs a VIP; with endpoint mode dnsrr publish in host mode")
			}
		default:
			errs.add(pp+".publish", "%q is not valid: expected ingress or host", sp.Publish)
		}
	}
}

func admitTolerations(tols []Toleration, p string, errs *ErrorList) {
	for i, t := range tols {
		admitTaintTerm(t.Key, t.Value, t.Effect, false, index(p, i), errs)
	}
}

// admitTaintTerm checks a taint's or a toleration's key, value and
// effect (which a taint must have) at field path tp.
func admitTaintTerm(key, value string, effect TaintEffect, needEffect bool, tp string, errs *ErrorList) {
	if key == "" {
		errs.add(tp+".key", "missing")
	} else if err := validLabelKey(key); err != nil {
		errs.add(tp+".key", "%v", err)
	}
	if value != "" {
		if err := validLabelValue(value); err != nil {
			errs.add(tp+".value", "%v", err)
		}
	}
	switch {
	case effect == "" && needEffect:
		errs.add(tp+".effect", "missing: expected NoSchedule, PreferNoSchedule or NoExecute")
	case effect != "" && !validEffect(effect):
		errs.add(tp+".effect", "%q is not valid: expected NoSchedule, PreferNoSchedule or NoExecute", effect)
	}
}

func admitPlacement(pl *Placement, p string, errs *ErrorList) {
	for _, l := range []struct {
		name string
		n    int
	}{{"constraints", len(pl.Constraints)}, {"preferences", len(pl.Preferences)}, {"tolerations", len(pl.Tolerations)},
		{"antiAffinity", len(pl.AntiAffinity)}, {"affinity", len(pl.Affinity)}} {
		if !withinCount(l.n, MaxPlacementTerms, p+"."+l.name, l.name, errs) {
			return
		}
	}
	for i, s := range pl.Constraints {
		c, err := ParseConstraint(s)
		if err != nil {
			errs.add(index(p+".constraints", i), "%v", err)
			continue
		}
		pl.Constraints[i] = c.String()
	}
	for i := range pl.Preferences {
		pp := index(p+".preferences", i) + ".spread"
		sp := strings.TrimSpace(pl.Preferences[i].Spread)
		pl.Preferences[i].Spread = sp
		switch {
		case sp == "":
			errs.add(pp, "missing: expected node.labels.<key>")
		case !strings.HasPrefix(sp, labelsPrefix):
			errs.add(pp, "%q: expected node.labels.<key>", sp)
		default:
			if err := validLabelKey(sp[len(labelsPrefix):]); err != nil {
				errs.add(pp, "label key %v", err)
			}
		}
	}
	admitTolerations(pl.Tolerations, p+".tolerations", errs)
	for _, aff := range []struct {
		name  string
		terms []AffinityTerm
	}{{"antiAffinity", pl.AntiAffinity}, {"affinity", pl.Affinity}} {
		for i, t := range aff.terms {
			tp := index(p+"."+aff.name, i)
			if len(t.Services) == 0 {
				errs.add(tp+".services", "missing: expected the labels of the services whose tasks it names")
			}
			validLabels(t.Services, tp+".services", errs)
			if aff.name == "affinity" && t.Required {
				errs.add(tp+".required", "affinity is a preference only; required placement is what constraints are for")
			}
		}
	}
}

func validEffect(e TaintEffect) bool {
	return e == NoSchedule || e == PreferNoSchedule || e == NoExecute
}

// --- Pods -----------------------------------------------------------------

type podContext struct {
	stateful       bool
	job            bool
	defaultRestart RestartCondition
}

func admitPod(pod *PodSpec, p string, ctx podContext, errs *ErrorList) {
	if len(pod.Containers) == 0 {
		errs.add(p+".containers", "missing: a pod needs at least one container")
	}
	if pod.RestartedAt != nil && ctx.job {
		errs.add(p+".restartedAt", "not allowed for a Job, whose tasks run to completion: only a Service's tasks are restarted (legion rollout restart)")
	}
	ok := withinCount(len(pod.Containers), MaxContainers, p+".containers", "containers", errs)
	ok = withinCount(len(pod.InitContainers), MaxContainers, p+".initContainers", "init containers", errs) && ok
	ok = withinCount(len(pod.Volumes), MaxVolumes, p+".volumes", "volumes", errs) && ok
	ok = withinCount(len(pod.ImagePullSecrets), MaxPullSecrets, p+".imagePullSecrets", "pull secrets", errs) && ok
	if !ok {
		return
	}
	// Pod volumes first: mounts refer to them.
	vols := map[string]int{}
	for i := range pod.Volumes {
		v := &pod.Volumes[i]
		vp := index(p+".volumes", i)
		if err := ValidName(v.Name); err != nil {
			errs.add(vp+".name", "%v", err)
		} else if j, dup := vols[v.Name]; dup {
			errs.add(vp+".name", "%q is already the name of volumes[%d]", v.Name, j)
		}
		vols[v.Name] = i
		sources := 0
		if v.Volume != nil {
			sources++
			if err := ValidName(v.Volume.Name); err != nil {
				errs.add(vp+".volume.name", "%v", err)
			}
		}
		if v.Claim != nil {
			sources++
			if !ctx.stateful {
				errs.add(vp+".claim", "only a stateful service's pod claims volumes of its own")
			}
			if v.Claim.Size <= 0 {
				errs.add(vp+".claim.size", "missing: a claim needs a size")
			}
		}
		if v.Tmpfs != nil {
			sources++
		}
		if v.HostPath != nil {
			sources++
			admitHostPath(v.HostPath.Path, vp+".hostPath.path", errs)
		}
		if sources != 1 {
			errs.add(vp, "expected exactly one of volume, claim, tmpfs or hostPath, got %d", sources)
		}
	}
	seenSecrets := map[string]bool{}
	for i, s := range pod.ImagePullSecrets {
		sp := index(p+".imagePullSecrets", i)
		if err := ValidName(s); err != nil {
			errs.add(sp, "%v", err)
		} else if seenSecrets[s] {
			errs.add(sp, "%q is listed twice", s)
		}
		seenSecrets[s] = true
	}
	if pod.RestartPolicy == nil {
		pod.RestartPolicy = &RestartPolicy{}
	}
	rp := pod.RestartPolicy
	oneOf(&rp.Condition, p+".restartPolicy.condition", ctx.defaultRestart, []RestartCondition{RestartAny, RestartOnFailure, RestartNone}, errs)
	if ctx.job && rp.Condition == RestartAny {
		errs.add(p+".restartPolicy.condition", "a Job's tasks may not restart on any exit: expected on-failure or none")
	}
	if rp.MaxAttempts < 0 {
		errs.add(p+".restartPolicy.maxAttempts", "%d is negative: expected 0 (no limit) or more", rp.MaxAttempts)
	}
	if rp.Delay == 0 {
		rp.Delay = Duration(time.Second)
	}
	if g := pod.FSGroup; g != nil && (*g < 0 || *g > MaxID) {
		errs.add(p+".fsGroup", "%d: expected a group id from 0 to %d", *g, MaxID)
	}
	if pod.Hostname != "" {
		if err := ValidName(pod.Hostname); err != nil {
			errs.add(p+".hostname", "%v", err)
		} else if ctx.stateful {
			errs.add(p+".hostname", "a stateful service's tasks are named <service>-<n>; a fixed hostname would give every ordinal the same")
		}
	}

	// Ports are unique across the pod: its containers share one stack.
	portNames := map[string]string{}
	portNumbers := map[string]string{}
	containerNames := map[string]string{}
	for _, list := range []struct {
		name string
		cs   []Container
	}{{"initContainers", pod.InitContainers}, {"containers", pod.Containers}} {
		for i := range list.cs {
			c := &list.cs[i]
			cp := index(p+"."+list.name, i)
			if err := ValidName(c.Name); err != nil {
				errs.add(cp+".name", "%v", err)
			} else if other, dup := containerNames[c.Name]; dup {
				errs.add(cp+".name", "%q is already the name of %s", c.Name, other)
			}
			containerNames[c.Name] = cp
			if !withinCount(len(c.Ports), MaxPorts, cp+".ports", "ports", errs) {
				continue
			}
			for j := range c.Ports {
				port := &c.Ports[j]
				pp := index(cp+".ports", j)
				oneOf(&port.Protocol, pp+".protocol", TCP, []Protocol{TCP, UDP}, errs)
				if port.ContainerPort == 0 {
					errs.add(pp+".containerPort", "missing")
				} else {
					checkCount(port.ContainerPort, pp+".containerPort", 1, 65535, errs)
					key := fmt.Sprintf("%d/%s", port.ContainerPort, port.Protocol)
					if other, dup := portNumbers[key]; dup {
						errs.add(pp+".containerPort", "%s is already %s: the pod's containers share one network stack", key, other)
					}
					portNumbers[key] = pp
				}
				if port.Name != "" {
					if err := ValidName(port.Name); err != nil {
						errs.add(pp+".name", "%v", err)
					} else if other, dup := portNames[port.Name]; dup {
						errs.add(pp+".name", "%q is already the name of %s", port.Name, other)
					}
					portNames[port.Name] = pp
				}
			}
		}
	}
	for i := range pod.InitContainers {
		admitContainer(&pod.InitContainers[i], index(p+".initContainers", i), pod, vols, true, errs)
	}
	for i := range pod.Containers {
		admitContainer(&pod.Containers[i], index(p+".containers", i), pod, vols, false, errs)
	}
}

func admitContainer(c *Container, p string, pod *PodSpec, vols map[string]int, init bool, errs *ErrorList) {
	if err := ValidImage(c.Image); err != nil {
		errs.add(p+".image", "%v", err)
	}
	oneOf(&c.PullPolicy, p+".pullPolicy", PullIfNotPresent, []PullPolicy{PullIfNotPresent, PullAlways, PullNever}, errs)
	admitExec(c, p, errs)
	withinLength(c.User, MaxText, p+".user", errs)
	ok := withinCount(len(c.VolumeMounts), MaxVolumes, p+".volumeMounts", "volume mounts", errs)
	ok = withinCount(len(c.Secrets), MaxVolumes, p+".secrets", "secret files", errs) && ok
	ok = withinCount(len(c.Configs), MaxVolumes, p+".configs", "config files", errs) && ok
	if !ok {
		return
	}
	envNames := map[string]int{}
	for i, e := range c.Env {
		ep := index(p+".env", i)
		switch {
		case e.Name == "":
			errs.add(ep+".name", "missing")
		case strings.ContainsAny(e.Name, "=\x00"):
			errs.add(ep+".name", "%q: an environment variable name has no '=' or NUL", e.Name)
		default:
			if j, dup := envNames[e.Name]; dup {
				errs.add(ep+".name", "%q is already env[%d]", e.Name, j)
			}
			envNames[e.Name] = i
		}
		sources := 0
		if e.Value != "" {
			sources++
		}
		for _, ref := range []struct{ what, name string }{{"secret", e.Secret}, {"config", e.Config}} {
			if ref.name == "" {
				continue
			}
			sources++
			if err := ValidName(ref.name); err != nil {
				errs.add(ep+"."+ref.what, "%v", err)
			}
		}
		if sources > 1 {
			errs.add(ep, "expected one of value, secret or config")
		}
	}
	if withinLength(c.WorkingDir, MaxPath, p+".workingDir", errs) && c.WorkingDir != "" && !path.IsAbs(c.WorkingDir) {
		errs.add(p+".workingDir", "%q: expected an absolute path", c.WorkingDir)
	}
	admitResources(&c.Resources, p+".resources", errs)
	if init {
		if c.Probes.Startup != nil || c.Probes.Liveness != nil || c.Probes.Readiness != nil {
			errs.add(p+".probes", "init containers run to completion and take no probes")
		}
	}
	for _, pr := range []struct {
		name  string
		probe *Probe
	}{{"startup", c.Probes.Startup}, {"liveness", c.Probes.Liveness}, {"readiness", c.Probes.Readiness}} {
		if pr.probe != nil {
			admitProbe(pr.probe, p+".probes."+pr.name, pod, pr.name != "readiness", errs)
		}
	}
	targets := map[string]string{}
	target := func(t, where string) {
		if other, dup := targets[t]; dup {
			errs.add(where, "%q is already the target of %s", t, other)
		}
		targets[t] = where
	}
	for i := range c.VolumeMounts {
		m := &c.VolumeMounts[i]
		mp := index(p+".volumeMounts", i)
		if m.Name == "" {
			errs.add(mp+".name", "missing")
		} else if _, ok := vols[m.Name]; !ok {
			errs.add(mp+".name", "%q names no volume of the pod", m.Name)
		}
		if cleaned, ok := absPath(m.Path, mp+".path", errs); ok {
			m.Path = cleaned
			target(cleaned, mp+".path")
		}
	}
	for _, files := range []struct {
		what, dir string
		refs      []FileRef
	}{{"secrets", "/run/secrets/", c.Secrets}, {"configs", "/run/configs/", c.Configs}} {
		for i := range files.refs {
			f := &files.refs[i]
			fp := index(p+"."+files.what, i)
			if err := ValidName(f.Name); err != nil {
				errs.add(fp+".name", "%v", err)
			}
			if f.Target == "" {
				f.Target = files.dir + f.Name
			}
			if cleaned, ok := absPath(f.Target, fp+".target", errs); ok {
				f.Target = cleaned
				target(cleaned, fp+".target")
			}
			if f.Mode == 0 {
				f.Mode = 0o444
			}
			if f.Mode < 0 || f.Mode > 0o777 {
				errs.add(fp+".mode", "%#o is out of range: expected file permission bits, 0 to 0777", f.Mode)
			}
			if f.UID < 0 || f.GID < 0 {
				errs.add(fp, "uid and gid must not be negative")
			}
		}
	}
	admitSecurity(&c.Security, p+".security", errs)
	if c.StopSignal != "" {
		// Stored by its canonical name, so quit and SIGQUIT store alike.
		if sig, ok := ParseStopSignal(c.StopSignal); ok {
			c.StopSignal = sig
		} else {
			errs.add(p+".stopSignal", "%q: expected %s (case and the SIG prefix optional)", c.StopSignal, stopSignalsExpected())
		}
	}
	defaultDur(&c.StopGracePeriod, DefaultStopGrace)
}

// admitExec holds a container's command line and environment, as written,
// to what one exec can take.
func admitExec(c *Container, p string, errs *ErrorList) {
	ok := withinCount(len(c.Command), MaxArgs, p+".command", "arguments", errs)
	ok = withinCount(len(c.Args), MaxArgs, p+".args", "arguments", errs) && ok
	ok = withinCount(len(c.Env), MaxEnv, p+".env", "variables", errs) && ok
	if !ok {
		return
	}
	n := 0
	for _, a := range c.Command {
		n += len(a) + 1
	}
	for _, a := range c.Args {
		n += len(a) + 1
	}
	for _, e := range c.Env {
		n += len(e.Name) + len("=") + len(e.Value) + 1
	}
	if n > MaxExecBytes {
		errs.add(p, "command, args and env take %d bytes, at most %d allowed (what one exec can pass)", n, MaxExecBytes)
	}
}

func absPath(s, p string, errs *ErrorList) (string, bool) {
	if s == "" {
		errs.add(p, "missing")
		return "", false
	}
	if !withinLength(s, MaxPath, p, errs) {
		return "", false
	}
	if !path.IsAbs(s) {
		errs.add(p, "%q: expected an absolute path", s)
		return "", false
	}
	for _, part := range strings.Split(s, "/") {
		if part == ".." {
			errs.add(p, "%q: a path may not climb with '..'", s)
			return "", false
		}
	}
	c := path.Clean(s)
	if c == "/" {
		errs.add(p, "cannot mount over the container's root")
		return "", false
	}
	return c, true
}

func admitResources(r *Resources, p string, errs *ErrorList) {
	if r.Limits.CPU != 0 && r.Requests.CPU > r.Limits.CPU {
		errs.add(p+".requests.cpu", "%s is above the limit %s", r.Requests.CPU, r.Limits.CPU)
	}
	if r.Limits.Memory != 0 && r.Requests.Memory > r.Limits.Memory {
		errs.add(p+".requests.memory", "%s is above the limit %s", r.Requests.Memory, r.Limits.Memory)
	}
	if r.Limits.Maxproc < 0 {
		errs.add(p+".limits.maxproc", "%d is negative", r.Limits.Maxproc)
	}
	if r.Limits.Openfiles < 0 {
		errs.add(p+".limits.openfiles", "%d is negative", r.Limits.Openfiles)
	}
}

func admitProbe(pr *Probe, p string, pod *PodSpec, single bool, errs *ErrorList) {
	kinds := 0
	checkPort := func(ref PortRef, pp string) {
		switch {
		case ref.IsZero():
			errs.add(pp, "missing")
		case ref.Name != "":
			if _, ok := pod.FindPort(ref); !ok {
				errs.add(pp, "%q names no container port of the pod", ref.Name)
			}
		default:
			checkCount(ref.Number, pp, 1, 65535, errs)
		}
	}
	if pr.TCP != nil {
		kinds++
		checkPort(pr.TCP.Port, p+".tcp.port")
	}
	if pr.HTTP != nil {
		kinds++
		h := pr.HTTP
		checkPort(h.Port, p+".http.port")
		if h.Path == "" {
			h.Path = "/"
		} else if withinLength(h.Path, MaxText, p+".http.path", errs) && !strings.HasPrefix(h.Path, "/") {
			errs.add(p+".http.path", "%q: expected a path starting with /", h.Path)
		}
		oneOf(&h.Scheme, p+".http.scheme", "http", []string{"http", "https"}, errs)
		if withinCount(len(h.Headers), MaxHeaders, p+".http.headers", "headers", errs) {
			for i, hd := range h.Headers {
				hp := index(p+".http.headers", i)
				if withinLength(hd.Name, MaxText, hp+".name", errs) && (hd.Name == "" || strings.ContainsAny(hd.Name, ": \t\r\n")) {
					errs.add(hp+".name", "%q is not a header name", hd.Name)
				}
				withinLength(hd.Value, MaxText, hp+".value", errs)
			}
		}
	}
	if pr.GRPC != nil {
		kinds++
		checkPort(pr.GRPC.Port, p+".grpc.port")
	}
	if pr.Exec != nil {
		kinds++
		if len(pr.Exec.Command) == 0 {
			errs.add(p+".exec.command", "missing")
		} else if withinCount(len(pr.Exec.Command), MaxArgs, p+".exec.command", "arguments", errs) {
			n := 0
			for _, a := range pr.Exec.Command {
				n += len(a) + 1
			}
			if n > MaxExecBytes {
				errs.add(p+".exec.command", "%d bytes, at most %d allowed", n, MaxExecBytes)
			}
		}
	}
	if kinds != 1 {
		errs.add(p, "expected exactly one of tcp, http, grpc or exec, got %d", kinds)
	}
	if pr.Period == 0 {
		pr.Period = Duration(10 * time.Second)
	}
	if pr.Timeout == 0 {
		pr.Timeout = Duration(time.Second)
	}
	if pr.FailureThreshold == 0 {
		pr.FailureThreshold = 3
	}
	if pr.SuccessThreshold == 0 {
		pr.SuccessThreshold = 1
	}
	checkCount(pr.FailureThreshold, p+".failureThreshold", 1, 1000, errs)
	checkCount(pr.SuccessThreshold, p+".successThreshold", 1, 1000, errs)
	if single && pr.SuccessThreshold != 1 {
		errs.add(p+".successThreshold", "must be 1 for startup and liveness probes")
	}
}

var containerAllows = []string{AllowRawSockets, AllowChflags, AllowMlock, AllowSysvipc}

func admitSecurity(s *Security, p string, errs *ErrorList) {
	s.Allow = admitAllowList(s.Allow, p+".allow", containerAllows, errs)
	defaultInt(&s.Securelevel, 2)
	defaultInt(&s.EnforceStatfs, 2)
	checkCount(*s.Securelevel, p+".securelevel", -1, 3, errs)
	checkCount(*s.EnforceStatfs, p+".enforceStatfs", 1, 2, errs)
}

// admitAllowList checks names against allowed and returns them sorted
// without repeats, so the same set always stores the same.
func admitAllowList(list []string, p string, allowed []string, errs *ErrorList) []string {
	for i, a := range list {
		if !slices.Contains(allowed, a) {
			errs.add(index(p, i), "%q is not valid: expected one of %s", a, strings.Join(allowed, ", "))
		}
	}
	out := slices.Clone(list)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil
	}
	return out
}

// --- Jobs -----------------------------------------------------------------

func admitJob(j *JobSpec, p string, errs *ErrorList) {
	oneOf(&j.Mode, p+".mode", JobReplicated, []JobMode{JobReplicated, JobGlobal}, errs)
	if j.Mode == JobReplicated {
		if j.Completions == 0 {
			j.Completions = 1
		}
		if j.Parallelism == 0 {
			j.Parallelism = 1
		}
		checkCount(j.Completions, p+".completions", 1, MaxReplicas, errs)
		checkCount(j.Parallelism, p+".parallelism", 1, MaxReplicas, errs)
	} else {
		if j.Completions != 0 {
			errs.add(p+".completions", "not allowed for a global job, which completes once on each eligible node")
		}
		if j.Parallelism != 0 {
			errs.add(p+".parallelism", "not allowed for a global job, which runs on every eligible node at once")
		}
	}
	defaultInt(&j.BackoffLimit, DefaultBackoff)
	checkCount(*j.BackoffLimit, p+".backoffLimit", 0, MaxReplicas, errs)
	if j.ActiveDeadline != nil && *j.ActiveDeadline == 0 {
		errs.add(p+".activeDeadline", "must be longer than 0s; leave it out for no deadline")
	}
	admitPod(&j.Pod, p+".pod", podContext{job: true, defaultRestart: RestartNone}, errs)
	admitPlacement(&j.Placement, p+".placement", errs)
}

func admitCronJob(c *CronJob, errs *ErrorList) {
	if n := c.Metadata.Name; len(n) > MaxCronJobName {
		errs.add("metadata.name", "%q is %d characters, at most %d allowed for a CronJob (its Jobs add -<minutes since the epoch>)", n, len(n), MaxCronJobName)
	}
	s := &c.Spec
	s.Schedule = strings.Join(strings.Fields(s.Schedule), " ")
	if fields, ok := scheduleMacros[strings.ToLower(s.Schedule)]; ok {
		s.Schedule = fields
	}
	if s.Schedule == "" {
		errs.add("spec.schedule", "missing: expected five cron fields (minute hour day-of-month month day-of-week), in UTC")
	} else if err := ValidSchedule(s.Schedule); err != nil {
		errs.add("spec.schedule", "%v", err)
	}
	if s.StartingDeadline != nil && *s.StartingDeadline == 0 {
		errs.add("spec.startingDeadline", "must be longer than 0s; leave it out for no deadline")
	}
	oneOf(&s.ConcurrencyPolicy, "spec.concurrencyPolicy", ConcurrencyAllow, []ConcurrencyPolicy{ConcurrencyAllow, ConcurrencyForbid, ConcurrencyReplace}, errs)
	defaultInt(&s.SuccessfulJobsHistoryLimit, 3)
	defaultInt(&s.FailedJobsHistoryLimit, 1)
	checkCount(*s.SuccessfulJobsHistoryLimit, "spec.successfulJobsHistoryLimit", 0, 1000, errs)
	checkCount(*s.FailedJobsHistoryLimit, "spec.failedJobsHistoryLimit", 0, 1000, errs)
	admitJob(&s.Job, "spec.job", errs)
}

// --- Storage, secrets, namespaces, nodes ------------------------------------

func admitValue(s *SecretSpec, errs *ErrorList) {
	switch {
	case s.Data != nil && s.Text != "":
		errs.add("spec", "expected one of data (base64) or text, got both")
	case s.Text != "":
		s.Data, s.Text = []byte(s.Text), ""
	case s.Data == nil:
		errs.add("spec.data", "missing: expected data (base64) or text")
	}
	if len(s.Data) > MaxValueSize {
		errs.add("spec.data", "%d bytes is over the limit of %d (500 KiB)", len(s.Data), MaxValueSize)
	}
}

func admitVolume(v *VolumeSpec, errs *ErrorList) {
	oneOf(&v.Driver, "spec.driver", DriverZFS, []VolumeDriver{DriverZFS, DriverNFS, DriverISCSI, DriverPlugin}, errs)
	if v.Driver != DriverZFS {
		if v.Size != 0 {
			errs.add("spec.size", "only a zfs volume has a size, this one is %s", v.Driver)
		}
		if v.Node != "" {
			errs.add("spec.node", "only a zfs volume is kept on a node, this one is %s", v.Driver)
		}
	} else if v.Node != "" {
		if err := ValidName(v.Node); err != nil {
			errs.add("spec.node", "%v", err)
		}
	}
	want := map[VolumeDriver]bool{DriverNFS: v.NFS != nil, DriverISCSI: v.ISCSI != nil, DriverPlugin: v.Plugin != nil}
	for d, given := range want {
		if given && d != v.Driver {
			errs.add("spec."+string(d), "given for a %s volume: expected driver: %s", v.Driver, d)
		}
		if !given && d == v.Driver {
			errs.add("spec."+string(d), "missing for driver %s", d)
		}
	}
	if n := v.NFS; n != nil && v.Driver == DriverNFS {
		if n.Server == "" {
			errs.add("spec.nfs.server", "missing")
		}
		withinLength(n.Server, MaxText, "spec.nfs.server", errs)
		withinLength(n.Options, MaxText, "spec.nfs.options", errs)
		if withinLength(n.Path, MaxPath, "spec.nfs.path", errs) && !path.IsAbs(n.Path) {
			errs.add("spec.nfs.path", "%q: expected the export's absolute path", n.Path)
		}
	}
	if i := v.ISCSI; i != nil && v.Driver == DriverISCSI {
		if i.Portal == "" {
			errs.add("spec.iscsi.portal", "missing")
		}
		if i.Target == "" {
			errs.add("spec.iscsi.target", "missing")
		}
		withinLength(i.Portal, MaxText, "spec.iscsi.portal", errs)
		withinLength(i.Target, MaxText, "spec.iscsi.target", errs)
		if i.LUN < 0 {
			errs.add("spec.iscsi.lun", "%d is negative", i.LUN)
		}
	}
	if pl := v.Plugin; pl != nil && v.Driver == DriverPlugin {
		if err := ValidName(pl.Name); err != nil {
			errs.add("spec.plugin.name", "%v", err)
		}
		if withinCount(len(pl.Options), MaxPluginOptions, "spec.plugin.options", "options", errs) {
			for _, k := range sortedKeys(pl.Options) {
				if withinLength(k, MaxText, "spec.plugin.options", errs) {
					withinLength(pl.Options[k], MaxText, field("spec.plugin.options", k), errs)
				}
			}
		}
	}
}

var namespaceAllows = []string{AllowRawSockets, AllowChflags, AllowMlock, AllowSysvipc, AllowSecurelevel, AllowEnforceStatfs, AllowHostPath, AllowPublish,
	AllowNFSVolumes, AllowISCSIVolumes, AllowPluginVolumes}

func admitNamespace(n *Namespace, errs *ErrorList) {
	s := &n.Spec
	oneOf(&s.Isolation, "spec.isolation", IsolationNamespace, []Isolation{IsolationNamespace, IsolationOpen, IsolationLocked}, errs)
	if q := s.Quota; q != nil {
		if q.Tasks != nil && *q.Tasks < 0 {
			errs.add("spec.quota.tasks", "%d is negative", *q.Tasks)
		}
		if q.Volumes != nil && *q.Volumes < 0 {
			errs.add("spec.quota.volumes", "%d is negative", *q.Volumes)
		}
		if q.Objects != nil && *q.Objects < 0 {
			errs.add("spec.quota.objects", "%d is negative", *q.Objects)
		}
	}
	s.Security.Allow = admitAllowList(s.Security.Allow, "spec.security.allow", namespaceAllows, errs)
	if withinCount(len(s.Security.Tolerations), MaxPlacementTerms, "spec.security.tolerations", "tolerations", errs) {
		admitTolerations(s.Security.Tolerations, "spec.security.tolerations", errs)
	}
}

func admitNode(s *NodeSpec, errs *ErrorList) {
	oneOf(&s.Role, "spec.role", RoleWorker, []NodeRole{RoleManager, RoleWorker}, errs)
	oneOf(&s.Availability, "spec.availability", AvailabilityActive, []Availability{AvailabilityActive, AvailabilityPause, AvailabilityDrain}, errs)
	seen := map[string]int{}
	if !withinCount(len(s.Taints), MaxPlacementTerms, "spec.taints", "taints", errs) {
		return
	}
	for i, t := range s.Taints {
		tp := index("spec.taints", i)
		admitTaintTerm(t.Key, t.Value, t.Effect, true, tp, errs)
		key := t.Key + ":" + string(t.Effect)
		if j, dup := seen[key]; dup {
			errs.add(tp, "taint %s is already taints[%d]", key, j)
		}
		seen[key] = i
	}
}
