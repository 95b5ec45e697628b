package sessions

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// resolved is what a session reaches.
type resolved struct {
	task      *legion.Task
	container string
}

// ownerKinds are the kinds a session may name besides a task.
var ownerKinds = []legion.Kind{legion.KindService, legion.KindJob}

// targetNamespace is the namespace t names a task in. A caller's rights
// there are checked before the target is looked up, so that what is
// refused says nothing of what the namespace holds.
func targetNamespace(t *legionpb.Target) string {
	if t == nil || t.Namespace == "" {
		return legion.DefaultNamespace
	}
	return t.Namespace
}

// resolve finds the task and container t names.
func resolve(objs Objects, t *legionpb.Target) (resolved, error) {
	task, err := resolveTask(objs, t)
	if err != nil {
		return resolved{}, err
	}
	c, err := container(task, t.Container)
	if err != nil {
		return resolved{}, err
	}
	return resolved{task: task, container: c}, nil
}

// resolveTask finds the task t names, placed on a node.
func resolveTask(objs Objects, t *legionpb.Target) (*legion.Task, error) {
	if t == nil || t.Name == "" {
		return nil, status.Error(codes.InvalidArgument, "target.name: a task, service or job name is required")
	}
	ns := targetNamespace(t)
	var kinds []legion.Kind
	switch k := legion.Kind(t.Kind); {
	case k == "":
		kinds = append([]legion.Kind{legion.KindTask}, ownerKinds...)
	case strings.EqualFold(string(k), string(legion.KindTask)):
		kinds = []legion.Kind{legion.KindTask}
	case strings.EqualFold(string(k), string(legion.KindService)):
		kinds = []legion.Kind{legion.KindService}
	case strings.EqualFold(string(k), string(legion.KindJob)):
		kinds = []legion.Kind{legion.KindJob}
	default:
		return nil, status.Errorf(codes.InvalidArgument, "target.kind %q: expected Task, Service or Job", t.Kind)
	}
	var task *legion.Task
	for _, kind := range kinds {
		o, _, err := objs.Get(kind, ns, t.Name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, status.Errorf(codes.Unavailable, "reading %s %s/%s: %v", kind, ns, t.Name, err)
		}
		if kind == legion.KindTask {
			task = o.(*legion.Task)
		} else if task, err = ownerTask(objs, kind, ns, t.Name); err != nil {
			return nil, err
		}
		break
	}
	if task == nil && len(kinds) > 1 {
		// A stateful ordinal by its stable name (db-0), as its hostname
		// and DNS name say it.
		ordinal := func(x *legion.Task) bool { return x.OfOrdinal(t.Name) }
		var err error
		if task, err = pickTask(objs, ns, ordinal); err != nil {
			return nil, err
		}
		if task == nil {
			waiting, _, err := objs.List(legion.KindTask, ns, func(o legion.Object) bool { return ordinal(o.(*legion.Task)) })
			if err == nil && len(waiting) > 0 {
				return nil, status.Errorf(codes.FailedPrecondition, "stateful ordinal %s/%s has no task that reached a node: no output yet", ns, t.Name)
			}
		}
	}
	if task == nil {
		what := "task, service, job or stateful ordinal"
		if len(kinds) == 1 {
			what = strings.ToLower(string(kinds[0]))
		}
		return nil, status.Errorf(codes.NotFound, "no %s named %s in namespace %s", what, t.Name, ns)
	}
	if task.Spec.Node == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "task %s/%s is not on a node yet: it has no output", ns, task.Metadata.Name)
	}
	return task, nil
}

// ownerTask picks the task of a Service or Job to read (pickTask).
func ownerTask(objs Objects, kind legion.Kind, ns, name string) (*legion.Task, error) {
	t, err := pickTask(objs, ns, func(t *legion.Task) bool { return t.Spec.Owner.Kind == kind && t.Spec.Owner.Name == name })
	if err == nil && t == nil {
		err = status.Errorf(codes.FailedPrecondition, "%s %s/%s has no task that reached a node: no output yet", strings.ToLower(string(kind)), ns, name)
	}
	return t, err
}

// pickTask picks, among a namespace's tasks on a node that match, the
// one to read: a running one (the lowest slot, then the latest started),
// else the one that last ended, else one on its way; nil when none match.
func pickTask(objs Objects, ns string, match func(*legion.Task) bool) (*legion.Task, error) {
	list, _, err := objs.List(legion.KindTask, ns, func(o legion.Object) bool {
		t := o.(*legion.Task)
		return match(t) && t.Spec.Node != ""
	})
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "listing the tasks of namespace %s: %v", ns, err)
	}
	var running, ended, other []*legion.Task
	for _, o := range list {
		t := o.(*legion.Task)
		switch {
		case t.Status.State == legion.TaskRunning:
			running = append(running, t)
		case t.Status.State.Terminal():
			ended = append(ended, t)
		default:
			other = append(other, t)
		}
	}
	switch {
	case len(running) > 0:
		sort.SliceStable(running, func(i, j int) bool {
			a, b := running[i], running[j]
			if a.Spec.Slot != b.Spec.Slot {
				return a.Spec.Slot < b.Spec.Slot
			}
			return started(a).After(started(b))
		})
		return running[0], nil
	case len(ended) > 0:
		sort.SliceStable(ended, func(i, j int) bool { return endedAt(ended[i]).After(endedAt(ended[j])) })
		return ended[0], nil
	case len(other) > 0:
		return other[0], nil
	}
	return nil, nil
}

func started(t *legion.Task) time.Time {
	if t.Status.Started != nil {
		return *t.Status.Started
	}
	return t.Status.Timestamp
}

func endedAt(t *legion.Task) time.Time {
	if t.Status.Finished != nil {
		return *t.Status.Finished
	}
	return t.Status.Timestamp
}

// container picks the container to read: the one asked for, else the
// pod's only container; with several the caller must choose.
func container(t *legion.Task, asked string) (string, error) {
	var names, all []string
	for _, c := range t.Spec.Pod.Containers {
		names = append(names, c.Name)
	}
	for _, c := range t.Spec.Pod.AllContainers() {
		all = append(all, c.Name)
	}
	if asked != "" {
		for _, n := range all {
			if n == asked {
				return n, nil
			}
		}
		return "", status.Errorf(codes.NotFound, "task %s has no container %s: its containers are %s", t.Metadata.Name, asked, strings.Join(all, ", "))
	}
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", status.Errorf(codes.FailedPrecondition, "task %s has no containers", t.Metadata.Name)
	}
	return "", status.Error(codes.InvalidArgument, fmt.Sprintf("task %s has %d containers (%s): choose one with -c", t.Metadata.Name, len(names), strings.Join(names, ", ")))
}
