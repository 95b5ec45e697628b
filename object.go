package legion

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/legionbsd/legion/internal/jsonfast"
)

// APIVersion is the only version of the object model.
const APIVersion = "legion/v1"

// Kind names a type of object.
type Kind string

// The kinds of objects.
const (
	KindNamespace     Kind = "Namespace"
	KindNode          Kind = "Node"
	KindService       Kind = "Service"
	KindJob           Kind = "Job"
	KindCronJob       Kind = "CronJob"
	KindTask          Kind = "Task"
	KindSecret        Kind = "Secret"
	KindConfig        Kind = "Config"
	KindVolume        Kind = "Volume"
	KindNetworkPolicy Kind = "NetworkPolicy"
	KindRoute         Kind = "Route"
	KindRoleBinding   Kind = "RoleBinding"
	KindImagePolicy   Kind = "ImagePolicy"
)

// Kinds lists every kind, in the order apply stores them: namespaces
// first, then what workloads refer to, then the rest.
func Kinds() []Kind {
	return []Kind{KindNamespace, KindImagePolicy, KindNode, KindSecret, KindConfig, KindVolume,
		KindRoleBinding, KindNetworkPolicy, KindService, KindJob, KindCronJob, KindRoute, KindTask}
}

// Namespaced reports whether objects of the kind live in a namespace.
// Namespaces, Nodes and ImagePolicies are cluster-scoped.
func (k Kind) Namespaced() bool {
	switch k {
	case KindNamespace, KindNode, KindImagePolicy:
		return false
	}
	return true
}

// Plural is the kind's name for many of it: Services, NetworkPolicies.
func (k Kind) Plural() string {
	if s, ok := strings.CutSuffix(string(k), "y"); ok {
		return s + "ies"
	}
	return string(k) + "s"
}

// Known reports whether k is a kind of the object model.
func (k Kind) Known() bool {
	for _, x := range Kinds() {
		if x == k {
			return true
		}
	}
	return false
}

// DefaultNamespace is where a namespaced object without a namespace goes.
const DefaultNamespace = "default"

// SystemNamespace is reserved for Legion's own records; the API never
// exposes it.
const SystemNamespace = "legion-system"

// Metadata is the part of the envelope every object shares. UID, Version
// and Generation are set by the server: the version is the Raft index of
// the object's last write, the generation bumps on spec changes only.
type Metadata struct {
	Name       string            `json:"name"`
	Namespace  string            `json:"namespace,omitempty"`
	Labels     map[string]string `json:"labels,omitempty"`
	UID        string            `json:"uid,omitempty"`
	Version    uint64            `json:"version,omitempty"`
	Generation uint64            `json:"generation,omitempty"`
}

// Key is the store key of an object: Kind/namespace/name (the namespace is
// empty for cluster-scoped kinds).
func Key(kind Kind, namespace, name string) string {
	return string(kind) + "/" + namespace + "/" + name
}

// Object is any object of the model. Every kind's Go type implements it;
// SpecPtr and StatusPtr return pointers to the kind's spec and status
// structs (StatusPtr returns nil for kinds without a status).
type Object interface {
	GetKind() Kind
	GetMetadata() *Metadata
	SpecPtr() any
	StatusPtr() any
}

// Header is the envelope's type fields and metadata, embedded by every kind.
type Header struct {
	APIVersion string   `json:"apiVersion"`
	Kind       Kind     `json:"kind"`
	Metadata   Metadata `json:"metadata"`
}

// GetKind returns the object's kind.
func (h *Header) GetKind() Kind { return h.Kind }

// GetMetadata returns the object's metadata for reading and writing.
func (h *Header) GetMetadata() *Metadata { return &h.Metadata }

// ObjectKey is the store key of an object.
func ObjectKey(o Object) string {
	m := o.GetMetadata()
	return Key(o.GetKind(), m.Namespace, m.Name)
}

// DisplayName is namespace/name for namespaced objects and name otherwise.
func DisplayName(o Object) string {
	m := o.GetMetadata()
	if m.Namespace == "" {
		return m.Name
	}
	return m.Namespace + "/" + m.Name
}

// New returns an empty object of the kind, with its header filled in.
func New(kind Kind) (Object, error) {
	var o Object
	switch kind {
	case KindNamespace:
		o = &Namespace{}
	case KindNode:
		o = &Node{}
	case KindService:
		o = &Service{}
	case KindJob:
		o = &Job{}
	case KindCronJob:
		o = &CronJob{}
	case KindTask:
		o = &Task{}
	case KindSecret:
		o = &Secret{}
	case KindConfig:
		o = &Config{}
	case KindVolume:
		o = &Volume{}
	case KindNetworkPolicy:
		o = &NetworkPolicy{}
	case KindRoute:
		o = &Route{}
	case KindRoleBinding:
		o = &RoleBinding{}
	case KindImagePolicy:
		o = &ImagePolicy{}
	default:
		return nil, fmt.Errorf("unknown kind %q: expected one of %s", kind, kindList())
	}
	h := headerOf(o)
	h.APIVersion, h.Kind = APIVersion, kind
	return o, nil
}

func kindList() string {
	ks := make([]string, 0, len(Kinds()))
	for _, k := range Kinds() {
		ks = append(ks, string(k))
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// headerOf reaches the embedded Header of any kind's struct.
func headerOf(o Object) *Header {
	type headered interface{ header() *Header }
	return o.(headered).header()
}

func (h *Header) header() *Header { return h }

// FromJSON decodes an object stored or sent as JSON, choosing the Go type
// by its kind. It is lenient about unknown fields, as it reads what the
// server already admitted; use Decode for what users write.
func FromJSON(data []byte) (Object, error) {
	var h Header
	if err := jsonfast.Unmarshal(data, &h); err != nil {
		return nil, fmt.Errorf("decoding object: %w", err)
	}
	o, err := New(h.Kind)
	if err != nil {
		return nil, err
	}
	if err := jsonfast.Unmarshal(data, o); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", h.Kind, err)
	}
	return o, nil
}

// FromJSONAs decodes an object expected to be of kind in one pass over
// its JSON (FromJSON reads it twice, the first time for its kind): what
// the state machine and the agents decode for every write and every
// assignment. An object of another kind is decoded as FromJSON does.
func FromJSONAs(kind Kind, data []byte) (Object, error) {
	o, err := New(kind)
	if err != nil {
		return FromJSON(data)
	}
	if err := jsonfast.Unmarshal(data, o); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kind, err)
	}
	if o.GetKind() != kind {
		return FromJSON(data) // not the kind expected: as it is
	}
	return o, nil
}

// Assemble builds an object from its parts as the wire carries them: the
// envelope's fields, and spec and status as JSON (either may be empty).
func Assemble(kind Kind, meta Metadata, spec, status []byte) (Object, error) {
	o, err := New(kind)
	if err != nil {
		return nil, err
	}
	*o.GetMetadata() = meta
	if len(spec) > 0 && o.SpecPtr() != nil {
		if err := jsonfast.Unmarshal(spec, o.SpecPtr()); err != nil {
			return nil, fmt.Errorf("decoding %s spec: %w", kind, err)
		}
	}
	if len(status) > 0 && o.StatusPtr() != nil {
		if err := jsonfast.Unmarshal(status, o.StatusPtr()); err != nil {
			return nil, fmt.Errorf("decoding %s status: %w", kind, err)
		}
	}
	return o, nil
}

// Clone returns a deep copy of an object.
func Clone(o Object) Object {
	data, err := json.Marshal(o)
	if err != nil {
		panic(fmt.Sprintf("legion: cloning %s: %v", o.GetKind(), err))
	}
	c, err := FromJSON(data)
	if err != nil {
		panic(fmt.Sprintf("legion: cloning %s: %v", o.GetKind(), err))
	}
	return c
}
