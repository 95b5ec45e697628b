package legion

import "time"

// Service is a long-running workload: replicated, global (one task per
// eligible node) or stateful (ordinals with their own volumes).
type Service struct {
	Header
	Spec   ServiceSpec   `json:"spec"`
	Status ServiceStatus `json:"status,omitzero"`
}

// ServiceMode is how a service's slots are made.
type ServiceMode string

// Service modes.
const (
	ModeReplicated ServiceMode = "replicated"
	ModeGlobal     ServiceMode = "global"
	ModeStateful   ServiceMode = "stateful"
)

// ServiceSpec is what the user asks of a service.
type ServiceSpec struct {
	Mode      ServiceMode  `json:"mode"`
	Replicas  *int         `json:"replicas,omitempty"` // unset for global services
	Pod       PodSpec      `json:"pod"`
	Placement Placement    `json:"placement"`
	Endpoint  Endpoint     `json:"endpoint"`
	Update    UpdateConfig `json:"update"`
	Autoscale *Autoscale   `json:"autoscale,omitempty"`
	DependsOn []Dependency `json:"dependsOn,omitempty"` // waited for on first deploy
}

// Placement says where tasks may and should go.
type Placement struct {
	Constraints  []string       `json:"constraints,omitempty"`
	Preferences  []Preference   `json:"preferences,omitempty"`
	Tolerations  []Toleration   `json:"tolerations,omitempty"`
	AntiAffinity []AffinityTerm `json:"antiAffinity,omitempty"`
	Affinity     []AffinityTerm `json:"affinity,omitempty"`
}

// Preference spreads a service's tasks evenly over the values of a node
// label; each preference after the first spreads within those before it.
type Preference struct {
	Spread string `json:"spread"` // node.labels.<key>
}

// Toleration lets a service's tasks on nodes with a matching taint: the
// key always, the value and effect when given.
type Toleration struct {
	Key    string      `json:"key"`
	Value  string      `json:"value,omitempty"`
	Effect TaintEffect `json:"effect,omitempty"`
}

// String writes the toleration as the taint it matches:
// key[=value][:effect].
func (t Toleration) String() string { return Taint(t).String() }

// Covers reports whether t tolerates every taint o does: the same key, and
// o's value and effect where t names them.
func (t Toleration) Covers(o Toleration) bool {
	return t.Key == o.Key && (t.Value == "" || t.Value == o.Value) && (t.Effect == "" || t.Effect == o.Effect)
}

// AffinityTerm names the tasks of services carrying the given labels (of
// the same namespace). As anti-affinity, a required term keeps a task off
// nodes running such tasks; a preferred one only scores such nodes lower.
// As affinity (preferred only), it scores nodes running them higher.
type AffinityTerm struct {
	Services map[string]string `json:"services"`
	Required bool              `json:"required"`
}

// EndpointMode is how a service is reached: a virtual IP balanced by pf, or
// DNS round-robin over the ready tasks.
type EndpointMode string

// Endpoint modes.
const (
	EndpointVIP   EndpointMode = "vip"
	EndpointDNSRR EndpointMode = "dnsrr"
)

// Endpoint is how the service is reached.
type Endpoint struct {
	Mode  EndpointMode  `json:"mode"`
	Ports []ServicePort `json:"ports,omitempty"`
}

// PublishMode is how a service port is reached from outside the cluster.
type PublishMode string

// Publish modes.
const (
	PublishIngress PublishMode = "ingress" // every node, through the routing mesh
	PublishHost    PublishMode = "host"    // the node's own tasks only, keeping the client address
)

// ServicePort is a port of the service's VIP, and optionally published.
type ServicePort struct {
	Name          string      `json:"name,omitempty"`
	Protocol      Protocol    `json:"protocol"`
	Port          int         `json:"port"`
	TargetPort    PortRef     `json:"targetPort"`
	Publish       PublishMode `json:"publish,omitempty"`
	PublishedPort int         `json:"publishedPort,omitempty"`
}

// UpdateOrder is whether an update stops the old task before starting the
// new one or after the new one is ready.
type UpdateOrder string

// Update orders.
const (
	StopFirst  UpdateOrder = "stop-first"
	StartFirst UpdateOrder = "start-first"
)

// FailureAction is what an update does when a new task fails within its
// monitor window.
type FailureAction string

// Failure actions.
const (
	FailurePause    FailureAction = "pause"
	FailureContinue FailureAction = "continue"
	FailureRollback FailureAction = "rollback"
)

// UpdateConfig is how a rolling update proceeds.
type UpdateConfig struct {
	Parallelism    *int          `json:"parallelism"` // slots replaced at once; 0: all; default 1
	Delay          Duration      `json:"delay"`
	Order          UpdateOrder   `json:"order"`
	FailureAction  FailureAction `json:"failureAction"`
	Monitor        *Duration     `json:"monitor"`                  // default 5s
	MaxUnavailable *int          `json:"maxUnavailable,omitempty"` // disruption budget; unset: none
	Snapshot       bool          `json:"snapshot,omitempty"`       // stateful: snapshot claimed volumes first
}

// Autoscale sets the replica count of a replicated service from its ready
// tasks' use, as percentages of their requests.
type Autoscale struct {
	Min       int       `json:"min"`
	Max       int       `json:"max"`
	CPU       int       `json:"cpu,omitempty"`    // target percent of requested CPU
	Memory    int       `json:"memory,omitempty"` // target percent of requested memory
	DownDelay *Duration `json:"downDelay"`        // default 5m
}

// ServiceStatus is what controllers say about a service.
type ServiceStatus struct {
	ObservedGeneration uint64 `json:"observedGeneration,omitempty"`
	VIP                string `json:"vip,omitempty"`
	Replicas           int    `json:"replicas,omitempty"` // wanted now
	Running            int    `json:"running,omitempty"`
	Ready              int    `json:"ready,omitempty"`
	// Complete is the slots whose task exited 0 and that the restart
	// policy (none, on-failure) leaves so: a one-shot that ran.
	Complete  int              `json:"complete,omitempty"`
	Spec      *ServiceSpec     `json:"spec,omitempty"` // the spec seen last
	Update    *UpdateStatus    `json:"update,omitempty"`
	Autoscale *AutoscaleStatus `json:"autoscale,omitempty"`
	Images    *ImagesStatus    `json:"images,omitempty"`
	Message   string           `json:"message,omitempty"`
}

// UpdateState is where a rolling update stands.
type UpdateState string

// Update states.
const (
	UpdateUpdating       UpdateState = "updating"
	UpdateCompleted      UpdateState = "completed"
	UpdatePaused         UpdateState = "paused"
	UpdateRollingBack    UpdateState = "rolling-back"
	UpdateRolledBack     UpdateState = "rolled-back"
	UpdateRollbackPaused UpdateState = "rollback-paused"
)

// UpdateStatus is the update under way or last done.
type UpdateStatus struct {
	State   UpdateState `json:"state"`
	Message string      `json:"message,omitempty"`
	// Failure is why the update a rollback undoes failed, when its
	// failure action started the rollback; empty for a rollback asked
	// for (legion rollback). It stays once the rollback is done: a
	// rolled-back update with a failure did not go through.
	Failure        string            `json:"failure,omitempty"`
	Started        *time.Time        `json:"started,omitempty"`
	Completed      *time.Time        `json:"completed,omitempty"`
	PreviousSpec   *ServiceSpec      `json:"previousSpec,omitempty"`
	PreviousImages map[string]string `json:"previousImages,omitempty"`
	Snapshot       string            `json:"snapshot,omitempty"`
}

// AutoscaleStatus is the autoscaler's count and the recent recommendations
// it shrinks by.
type AutoscaleStatus struct {
	Replicas        int              `json:"replicas"`
	Recommendations []Recommendation `json:"recommendations,omitempty"`
	Message         string           `json:"message,omitempty"`
}

// Recommendation is one pass's wanted count.
type Recommendation struct {
	Time     time.Time `json:"time"`
	Replicas int       `json:"replicas"`
}

// ImagesStatus records the digests the leader resolved a pod's tags to,
// keyed by a hash of the pod, and the signatures it verified.
type ImagesStatus struct {
	PodHash  string                   `json:"podHash,omitempty"`
	Digests  map[string]string        `json:"digests,omitempty"`
	Verified map[string]VerifiedImage `json:"verified,omitempty"`
	Message  string                   `json:"message,omitempty"`
	Warning  string                   `json:"warning,omitempty"`
}

// VerifiedImage is a signature check that passed.
type VerifiedImage struct {
	Digest string `json:"digest"`
	Key    string `json:"key"` // sha256: of the key's DER SubjectPublicKeyInfo
}

// WantedReplicas is the replica count a replicated or stateful service
// wants now: the autoscaler's when it has one, else the spec's.
func (s *Service) WantedReplicas() int {
	if s.Spec.Autoscale != nil && s.Status.Autoscale != nil && s.Status.Autoscale.Replicas > 0 {
		return s.Status.Autoscale.Replicas
	}
	if s.Spec.Replicas == nil {
		return 0
	}
	return *s.Spec.Replicas
}
