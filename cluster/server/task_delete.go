package server

import (
	"context"
	"errors"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
)

// stopTask answers the deletion of a task that runs on a node by having
// it stop, as the planner stops one, rather than deleting it at once: its
// pod runs on until its node has stopped it, and with the object gone the
// planner would start the slot's next task meanwhile, which for a
// stateful ordinal is a second pod on its Volume. The slot's next task
// starts once this one has stopped (as kubectl delete pod has a
// StatefulSet wait), and the stopped task stays in the slot's history;
// deleting it again once it has ended removes it. A task no node runs
// (pending, or ended) is not this function's: it reports false, and the
// caller deletes it.
func stopTask(ctx context.Context, st *store.Store, ns, name string, pre store.Precondition) (legion.Object, bool, error) {
	for attempt := 0; ; attempt++ {
		o, _, err := st.Get(legion.KindTask, ns, name)
		if err != nil {
			return nil, false, nil // the delete says what became of it
		}
		t := o.(*legion.Task)
		version := t.Metadata.Version
		if t.Status.State.Terminal() || t.Spec.Placed == nil || (pre.Version != 0 && pre.Version != version) {
			return nil, false, nil
		}
		if t.Spec.DesiredState == legion.TaskShutdown {
			return t, true, nil // stopping already
		}
		cp := *t
		cp.Spec.DesiredState = legion.TaskShutdown
		cp.Spec.StopReason = taskDeleted
		out, _, err := st.Put(ctx, &cp, store.WriteOptions{Precondition: store.Precondition{Version: version}, KeepStatus: true})
		if errors.Is(err, store.ErrConflict) && pre.Version == 0 && attempt < stopTaskAttempts {
			continue // a report or the planner wrote it meanwhile: read it again
		}
		return out, err == nil, err
	}
}

// taskDeleted is the stop reason of a task a delete stops.
const taskDeleted = "deleted"

// stopTaskAttempts bounds how often stopTask reads a task again that its
// node or the planner wrote meanwhile.
const stopTaskAttempts = 5
