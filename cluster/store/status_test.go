package store

import (
	"context"
	"testing"

	"github.com/legionbsd/legion"
)

// A status write replaces the status: a field set before and left out of
// the new status (false, empty) does not survive.
func TestStatusWriteReplacesTheStatus(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	o, _ := legion.New(legion.KindTask)
	task := o.(*legion.Task)
	task.Metadata = legion.Metadata{Name: "t", Namespace: "default"}
	task.Spec.DesiredState = legion.TaskRunning
	task.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, Message: "ready"}
	stored, _, err := n.s.Put(ctx, task, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	next := legion.Clone(stored).(*legion.Task)
	next.Status = legion.TaskStatus{State: legion.TaskRunning}
	if _, err := n.s.PutStatus(ctx, next, Precondition{Version: stored.GetMetadata().Version}); err != nil {
		t.Fatal(err)
	}
	got, _, err := n.s.Get(legion.KindTask, "default", "t")
	if err != nil {
		t.Fatal(err)
	}
	st := got.(*legion.Task).Status
	if st.Ready || st.Message != "" {
		t.Fatalf("status after the write: %+v; ready and message should be gone", st)
	}
	keep := legion.Clone(got).(*legion.Task)
	keep.Status = legion.TaskStatus{}
	keep.Spec.Slot = 7
	if _, _, err := n.s.Put(ctx, keep, WriteOptions{KeepStatus: true}); err != nil {
		t.Fatal(err)
	}
	got, _, _ = n.s.Get(legion.KindTask, "default", "t")
	if got.(*legion.Task).Status.State != legion.TaskRunning || got.(*legion.Task).Spec.Slot != 7 {
		t.Fatalf("KeepStatus lost the status or the spec: %+v", got)
	}
}
