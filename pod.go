package legion

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// PodSpec is what a task runs: init containers in order to completion,
// then the containers together, sharing one network stack.
type PodSpec struct {
	InitContainers   []Container    `json:"initContainers,omitempty"`
	Containers       []Container    `json:"containers"`
	Volumes          []PodVolume    `json:"volumes,omitempty"`
	ImagePullSecrets []string       `json:"imagePullSecrets,omitempty"`
	RestartPolicy    *RestartPolicy `json:"restartPolicy,omitempty"`
	Hostname         string         `json:"hostname,omitempty"`
	// FSGroup owns the root of every Volume the pod mounts when first
	// made, group-writable and setgid, like Kubernetes' fsGroup. Unset, the
	// root is owned by the user and group of the first container that
	// mounts it writable (its user, else its image's).
	FSGroup *int `json:"fsGroup,omitempty"`
	// RestartedAt is when legion rollout restart last asked for a
	// Service's tasks to be replaced: a new value changes the pod, which
	// replaces them in a rolling update. An apply that leaves it out keeps
	// the stored one, so applying the manifest again restarts nothing.
	RestartedAt *time.Time `json:"restartedAt,omitempty"`
}

// RestartPolicy says when a pod's containers (by the agent) and a slot's
// task (by the planner) are started again.
type RestartPolicy struct {
	Condition   RestartCondition `json:"condition"`
	MaxAttempts int              `json:"maxAttempts"` // 0: no limit
	Delay       Duration         `json:"delay"`       // first backoff; doubles per failure in a row, capped at 60s
}

// RestartCondition is when a finished container or task is started again.
type RestartCondition string

// Restart conditions.
const (
	RestartAny       RestartCondition = "any"
	RestartOnFailure RestartCondition = "on-failure"
	RestartNone      RestartCondition = "none"
)

// Container is one process tree of a pod, in its own jail.
type Container struct {
	Name            string          `json:"name"`
	Image           string          `json:"image"`
	PullPolicy      PullPolicy      `json:"pullPolicy"`
	Command         []string        `json:"command,omitempty"`
	Args            []string        `json:"args,omitempty"`
	Env             []EnvVar        `json:"env,omitempty"`
	WorkingDir      string          `json:"workingDir,omitempty"`
	User            string          `json:"user,omitempty"`
	Ports           []ContainerPort `json:"ports,omitempty"`
	Resources       Resources       `json:"resources"`
	Probes          Probes          `json:"probes"`
	VolumeMounts    []VolumeMount   `json:"volumeMounts,omitempty"`
	Secrets         []FileRef       `json:"secrets,omitempty"`
	Configs         []FileRef       `json:"configs,omitempty"`
	Security        Security        `json:"security"`
	StopSignal      string          `json:"stopSignal,omitempty"` // empty: the image's, else SIGTERM
	StopGracePeriod *Duration       `json:"stopGracePeriod"`      // default 10s
}

// PullPolicy says when a node asks a registry for a container's image.
type PullPolicy string

// Pull policies.
const (
	PullIfNotPresent PullPolicy = "if-not-present"
	PullAlways       PullPolicy = "always"
	PullNever        PullPolicy = "never"
)

// EnvVar is one environment variable: a value, or a Secret's or Config's.
type EnvVar struct {
	Name   string `json:"name"`
	Value  string `json:"value,omitempty"`
	Secret string `json:"secret,omitempty"`
	Config string `json:"config,omitempty"`
}

// ContainerPort is a port a container listens on. Names and numbers are
// unique across the pod, whose containers share one network stack.
type ContainerPort struct {
	Name          string   `json:"name,omitempty"`
	ContainerPort int      `json:"containerPort"`
	Protocol      Protocol `json:"protocol"`
}

// Protocol is a transport protocol.
type Protocol string

// Protocols.
const (
	TCP Protocol = "tcp"
	UDP Protocol = "udp"
)

// Resources are what a container asks the scheduler for (requests) and
// what rctl holds it to (limits).
type Resources struct {
	Requests ResourceRequests `json:"requests"`
	Limits   ResourceLimits   `json:"limits"`
}

// ResourceRequests are reserved on the node a task is placed on.
type ResourceRequests struct {
	CPU    CPU   `json:"cpu"`
	Memory Bytes `json:"memory"`
}

// ResourceLimits are enforced; zero means no limit.
type ResourceLimits struct {
	CPU       CPU   `json:"cpu"`
	Memory    Bytes `json:"memory"`
	Maxproc   int   `json:"maxproc"`
	Openfiles int   `json:"openfiles"`
}

// Probes are a container's startup, liveness and readiness checks.
type Probes struct {
	Startup   *Probe `json:"startup,omitempty"`
	Liveness  *Probe `json:"liveness,omitempty"`
	Readiness *Probe `json:"readiness,omitempty"`
}

// Probe is one check, of exactly one of the four sorts.
type Probe struct {
	TCP              *TCPProbe  `json:"tcp,omitempty"`
	HTTP             *HTTPProbe `json:"http,omitempty"`
	GRPC             *GRPCProbe `json:"grpc,omitempty"`
	Exec             *ExecProbe `json:"exec,omitempty"`
	InitialDelay     Duration   `json:"initialDelay"`
	Period           Duration   `json:"period"`
	Timeout          Duration   `json:"timeout"`
	FailureThreshold int        `json:"failureThreshold"`
	SuccessThreshold int        `json:"successThreshold"`
}

// TCPProbe passes when a connection to the port opens.
type TCPProbe struct {
	Port PortRef `json:"port"`
}

// HTTPProbe passes on a 2xx or 3xx answer.
type HTTPProbe struct {
	Path    string       `json:"path"`
	Port    PortRef      `json:"port"`
	Scheme  string       `json:"scheme"` // http or https
	Headers []HTTPHeader `json:"headers,omitempty"`
}

// HTTPHeader is one header an HTTP probe sends.
type HTTPHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// GRPCProbe calls grpc.health.v1.Health/Check.
type GRPCProbe struct {
	Port    PortRef `json:"port"`
	Service string  `json:"service,omitempty"`
}

// ExecProbe runs a command in the container; exit 0 passes.
type ExecProbe struct {
	Command []string `json:"command"`
}

// PortRef names a container port by number or by name.
type PortRef struct {
	Number int
	Name   string
}

// IsZero reports whether the reference is unset.
func (p PortRef) IsZero() bool { return p.Number == 0 && p.Name == "" }

func (p PortRef) String() string {
	if p.Name != "" {
		return p.Name
	}
	return strconv.Itoa(p.Number)
}

func (p PortRef) MarshalJSON() ([]byte, error) {
	if p.Name != "" {
		return json.Marshal(p.Name)
	}
	return json.Marshal(p.Number)
}

func (p *PortRef) UnmarshalJSON(b []byte) error {
	s, err := scalarJSON(b)
	if err != nil {
		return err
	}
	return p.decodeScalar(s)
}

func (p *PortRef) decodeScalar(s string) error {
	if n, err := strconv.Atoi(s); err == nil {
		*p = PortRef{Number: n}
		return nil
	}
	if s == "" {
		return fmt.Errorf("expected a port number or a port name")
	}
	*p = PortRef{Name: s}
	return nil
}

// VolumeMount mounts a pod volume into a container (by nullfs).
type VolumeMount struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly"`
}

// FileRef puts a Secret or Config into a container as a file.
type FileRef struct {
	Name   string `json:"name"`
	Target string `json:"target"` // default /run/secrets/<name> or /run/configs/<name>
	Mode   int    `json:"mode"`   // default 0444
	UID    int    `json:"uid"`
	GID    int    `json:"gid"`
}

// PodVolume is a volume of the pod: a Volume object, a claim (stateful
// services: a Volume of the task's own), a tmpfs living with the pod, or
// a directory or file of the node (only where the namespace allows
// hostPath).
type PodVolume struct {
	Name     string          `json:"name"`
	Volume   *VolumeRef      `json:"volume,omitempty"`
	Claim    *VolumeClaim    `json:"claim,omitempty"`
	Tmpfs    *TmpfsVolume    `json:"tmpfs,omitempty"`
	HostPath *HostPathVolume `json:"hostPath,omitempty"`
}

// HostPathVolume is a path on the node the task runs on, mounted as it is
// (nullfs on jails, a bind mount on the process platform). It must exist
// there: nothing creates it.
type HostPathVolume struct {
	Path string `json:"path"`
}

// VolumeRef names a Volume of the pod's namespace.
type VolumeRef struct {
	Name string `json:"name"`
}

// VolumeClaim makes a ZFS Volume per stateful ordinal,
// <claim>-<service>-<n>.
type VolumeClaim struct {
	Size Bytes `json:"size"`
}

// TmpfsVolume is memory-backed scratch space; zero size means no limit.
type TmpfsVolume struct {
	Size Bytes `json:"size"`
}

// Security loosens a container's jail from Legion's defaults.
type Security struct {
	Allow         []string `json:"allow,omitempty"` // rawSockets, chflags, mlock, sysvipc
	Securelevel   *int     `json:"securelevel"`     // -1..3, default 2
	EnforceStatfs *int     `json:"enforceStatfs"`   // 1 or 2, default 2
}

// The names a Security.Allow list and a Namespace's allow-list may hold.
const (
	AllowRawSockets = "rawSockets"
	AllowChflags    = "chflags"
	AllowMlock      = "mlock"
	AllowSysvipc    = "sysvipc"
	// Only in a Namespace's allow-list: a securelevel below 2, enforceStatfs 1.
	AllowSecurelevel   = "securelevel"
	AllowEnforceStatfs = "enforceStatfs"
	// Only in a Namespace's allow-list: pod volumes on the node's paths.
	AllowHostPath = "hostPath"
	// Only in a Namespace's allow-list: its users may publish ports, which
	// are the nodes' (the cluster admin always may).
	AllowPublish = "publish"
	// Only in a Namespace's allow-list: its users may make Volumes of these
	// drivers, which mount what the nodes can reach (the cluster admin
	// always may).
	AllowNFSVolumes    = "nfsVolumes"
	AllowISCSIVolumes  = "iscsiVolumes"
	AllowPluginVolumes = "pluginVolumes"
)

// PullSecretRef is what References calls a pull secret: a Secret the
// pod's nodes pull its images with, which its containers do not see.
const PullSecretRef = "pull Secret"

// References calls ref with each Secret, Config and Volume the pod names
// (name empty where a field names none), and what it is to the pod:
// "Secret" and "Config" (files and environment), "Volume", PullSecretRef.
func (p *PodSpec) References(ref func(kind Kind, name, what string)) {
	for _, c := range slices.Concat(p.InitContainers, p.Containers) {
		for _, e := range c.Env {
			ref(KindSecret, e.Secret, "Secret")
			ref(KindConfig, e.Config, "Config")
		}
		for _, f := range c.Secrets {
			ref(KindSecret, f.Name, "Secret")
		}
		for _, f := range c.Configs {
			ref(KindConfig, f.Name, "Config")
		}
	}
	for _, v := range p.Volumes {
		if v.Volume != nil {
			ref(KindVolume, v.Volume.Name, "Volume")
		}
	}
	for _, s := range p.ImagePullSecrets {
		ref(KindSecret, s, PullSecretRef)
	}
}

// KeepsCompleted reports whether a task of the pod that exited 0 stays
// complete: its restart policy (any when unset) starts it again only
// under condition any. The planner replaces slots by it, and counts the
// ones it leaves done (a one-shot's).
func (p *PodSpec) KeepsCompleted() bool {
	return p.RestartPolicy != nil && p.RestartPolicy.Condition != RestartAny
}

// AllContainers returns the init containers followed by the containers.
func (p *PodSpec) AllContainers() []*Container {
	out := make([]*Container, 0, len(p.InitContainers)+len(p.Containers))
	for i := range p.InitContainers {
		out = append(out, &p.InitContainers[i])
	}
	for i := range p.Containers {
		out = append(out, &p.Containers[i])
	}
	return out
}

// Requests adds up what the pod's containers request. Init containers run
// before the others, so a pod needs the larger of the largest init
// container's and the containers' sum.
func (p *PodSpec) Requests() ResourceRequests {
	var sum, initMax ResourceRequests
	for _, c := range p.Containers {
		sum.CPU += c.Resources.Requests.CPU
		sum.Memory += c.Resources.Requests.Memory
	}
	for _, c := range p.InitContainers {
		initMax.CPU = max(initMax.CPU, c.Resources.Requests.CPU)
		initMax.Memory = max(initMax.Memory, c.Resources.Requests.Memory)
	}
	return ResourceRequests{CPU: max(sum.CPU, initMax.CPU), Memory: max(sum.Memory, initMax.Memory)}
}

// PodOf is the pod a workload runs: a Service's or Job's, or the one of
// the Jobs a CronJob makes; nil for other kinds.
func PodOf(o Object) *PodSpec {
	switch w := o.(type) {
	case *Service:
		return &w.Spec.Pod
	case *Job:
		return &w.Spec.Pod
	case *CronJob:
		return &w.Spec.Job.Pod
	}
	return nil
}

// HasLimits reports whether any container of the pod has a limit rctl must
// enforce (a node without racct cannot run such a pod).
func (p *PodSpec) HasLimits() bool {
	for _, c := range p.AllContainers() {
		l := c.Resources.Limits
		if l.CPU != 0 || l.Memory != 0 || l.Maxproc != 0 || l.Openfiles != 0 {
			return true
		}
	}
	return false
}

// FindPort resolves a port reference to a container port of the pod.
func (p *PodSpec) FindPort(ref PortRef) (ContainerPort, bool) {
	for _, c := range p.Containers {
		for _, cp := range c.Ports {
			if (ref.Name != "" && cp.Name == ref.Name) || (ref.Name == "" && cp.ContainerPort == ref.Number) {
				return cp, true
			}
		}
	}
	return ContainerPort{}, false
}
