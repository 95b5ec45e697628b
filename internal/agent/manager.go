package agent

import (
	"context"
	"errors"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/endpoints"
)

// Labels every container of a task carries.
const (
	LabelTask      = "legion.task.id"
	LabelNode      = "legion.node.id"
	LabelContainer = "legion.container"
	LabelNamespace = "legion.namespace"
	LabelTaskName  = "legion.task.name"
)

// Assignments is everything a node must run, as a whole: each delivery
// replaces the one before.
type Assignments struct {
	Tasks []*legion.Task
	// Values are the Secrets and Configs the node's tasks use, keyed by
	// ValueKey.
	Values map[string][]byte
	// Endpoints are every service's ready tasks, for the node's load
	// balancing and DNS. They are shared with later deliveries (a new
	// list keeps the services that did not change): read them, never
	// write.
	Endpoints []*endpoints.Service
	// Peers are the mesh's nodes, for the node's wg0; nil when the
	// managers sent none.
	Peers []endpoints.Peer
	// Policies is the network policy state; nil when the managers sent
	// none.
	Policies *endpoints.Policies
	// Routes are every HTTP route with its backends, for the node's
	// ingress proxy; their certificates are in Values.
	Routes []endpoints.Route
	// Volumes are the Volumes the node's tasks mount and those bound to
	// the node or moving to or from it.
	Volumes []*legion.Volume
}

// ValueKey names a Secret's or Config's value in Assignments.Values.
func ValueKey(kind legion.Kind, namespace, name string) string {
	return legion.Key(kind, namespace, name)
}

// ErrNoManager is in the error of a Manager call that no manager could
// take: none answered, or none led (during an election). The same call
// may succeed later; any other error is a refusal.
var ErrNoManager = errors.New("no manager took it")

// Manager is the agent's view of the managers: its assignments in, task
// status out.
type Manager interface {
	// Assignments delivers the node's assignments each time they change,
	// until ctx ends.
	Assignments(ctx context.Context) (<-chan Assignments, error)
	// Report records a task's status as the node sees it; uid is the
	// task's metadata.uid, so that a report for a task since deleted is
	// not taken by the new task of its name.
	Report(ctx context.Context, namespace, name, uid string, st legion.TaskStatus) error
	// LeaderCalls counts the node's calls that a leader took
	// (heartbeats, reports, claims): once it moves past where it was at a
	// report no manager took, a leader is back (Resend).
	LeaderCalls() uint64
	// ClaimVolume takes a Volume for the node's task before the task uses
	// it, saying how the node keeps it (backend) and, when not nil, its
	// snapshots there (empty: none); a refusal (held by another node,
	// moving) is an error whose text says why.
	ClaimVolume(ctx context.Context, namespace, name, task, backend string, snapshots []string) (*legion.Volume, error)
	// ReleaseVolume lets go of a Volume once no task of the node uses it
	// and it is unmounted and detached.
	ReleaseVolume(ctx context.Context, namespace, name string) error
}

// Images is what the agent needs of the node's image store.
type Images interface {
	Pull(ctx context.Context, ref string, o image.PullOptions) (*image.Record, error)
	PrepareRoot(ctx context.Context, id, ref, namespace string, now time.Time) (string, error)
	RemoveRoot(ctx context.Context, id string) error
	// Roots lists the container roots the store holds.
	Roots(ctx context.Context) ([]image.Root, error)
}
