package store

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// A status write replaces the status: a field set before and left out of
// the new status (false, empty) does not survive.
func TestStatusWriteReplacesTheStatus(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	task := runningTask("t")
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

// A watch's events of writes carry the object as stored, byte for byte
// what encoding their object gives (a deletion's carries none), and the
// term of the entry that made them.
func TestEventsCarryTheStoredJSONAndTerm(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	at, err := n.s.Version()
	if err != nil {
		t.Fatal(err)
	}
	w, err := n.s.Watch(at)
	if err != nil {
		t.Fatal(err)
	}
	v := volume("default", "data", "1")
	stored, _, err := n.s.Put(ctx, v, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := legion.Clone(stored).(*legion.Volume)
	st.Status.Node = "n1"
	if _, err := n.s.PutStatus(ctx, st, Precondition{Version: stored.GetMetadata().Version}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.s.Delete(ctx, legion.KindVolume, "default", "data", Precondition{}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for _, want := range []EventType{Added, Modified, Deleted} {
		ev, err := w.Next(wctx)
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != want {
			t.Fatalf("event %s, want %s", ev.Type, want)
		}
		if term := n.s.Raft().CurrentTerm(); ev.Term != term {
			t.Errorf("%s event of term %d, want the leader's term %d", ev.Type, ev.Term, term)
		}
		if want == Deleted {
			if ev.StoredJSON() != nil {
				t.Errorf("a deletion's event carries stored JSON: %s", ev.StoredJSON())
			}
			continue
		}
		enc, err := legion.MarshalJSON(ev.Object)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ev.StoredJSON(), enc) {
			t.Errorf("%s event: stored JSON\n%s\nbut its object encodes to\n%s", want, ev.StoredJSON(), enc)
		}
	}
}

// A status write's command carries the status alone, and is still an
// object of its kind: a replica from before this, which decodes the whole
// command object and takes its status, reads the same status from it.
func TestStatusCommandsCarryTheStatusAlone(t *testing.T) {
	t.Parallel()
	o, _ := legion.New(legion.KindTask)
	task := o.(*legion.Task)
	task.Metadata = legion.Metadata{Name: "web.1", Namespace: "default", Labels: map[string]string{"app": "web"}}
	task.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example.org/web:1", Command: []string{"/bin/web"}}}
	task.Status = legion.TaskStatus{State: legion.TaskRunning, Ready: true, IP: "10.0.0.7"}
	c, err := putCommand(opStatus, task, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := legion.MarshalJSON(task)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(c.Object, []byte(`"spec"`)) || bytes.Contains(c.Object, []byte("example.org/web")) || len(c.Object) >= len(whole) {
		t.Errorf("status command object carries more than the status (%d bytes, the whole task %d): %s", len(c.Object), len(whole), c.Object)
	}
	read, err := legion.FromJSONAs(legion.KindTask, c.Object) // as replicas before this read it
	if err != nil {
		t.Fatalf("a replica from before cannot read the status command: %v", err)
	}
	if got := read.(*legion.Task).Status; !reflect.DeepEqual(got, task.Status) {
		t.Errorf("status read from the command %+v, want %+v", got, task.Status)
	}
	var st legion.TaskStatus
	if err := decodeStatus(c.Object, &st); err != nil || !reflect.DeepEqual(st, task.Status) {
		t.Errorf("decodeStatus read %+v, %v; want %+v", st, err, task.Status)
	}
}

// Decode reads part of an object, at the version Get reads it; a
// status written with WriteStatus (an object of the kind, name and
// status only) replaces the status under the version's precondition and
// leaves the spec as it was.
func TestDecodePartAndWriteStatusOnly(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	task := runningTask("t")
	task.Spec.Node = "n1"
	task.Spec.Pod.Containers = []legion.Container{{Name: "app", Image: "example/app:1"}}
	stored, _, err := n.s.Put(ctx, task, WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var p taskPart
	if _, err := n.s.Decode(legion.KindTask, "default", "t", &p); err != nil {
		t.Fatal(err)
	}
	if p.Metadata.Version != stored.GetMetadata().Version || p.Spec.Node != "n1" || p.Status.State != "" {
		t.Fatalf("decoded %+v; want version %d, node n1, no status", p, stored.GetMetadata().Version)
	}
	if _, err := n.s.Decode(legion.KindTask, "default", "missing", &p); !errors.Is(err, ErrNotFound) {
		t.Fatalf("decoding a missing task: %v, want ErrNotFound", err)
	}

	only := &legion.Task{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindTask,
		Metadata: legion.Metadata{Name: "t", Namespace: "default"}}, Status: legion.TaskStatus{State: legion.TaskRunning, Ready: true}}
	if err := n.s.WriteStatus(ctx, only, Precondition{Version: p.Metadata.Version}); err != nil {
		t.Fatal(err)
	}
	if err := n.s.WriteStatus(ctx, only, Precondition{Version: p.Metadata.Version}); !errors.Is(err, ErrConflict) {
		t.Fatalf("a status write at a version gone: %v, want ErrConflict", err)
	}
	got, _, err := n.s.Get(legion.KindTask, "default", "t")
	if err != nil {
		t.Fatal(err)
	}
	gt := got.(*legion.Task)
	if !reflect.DeepEqual(gt.Spec, stored.(*legion.Task).Spec) || gt.Status.State != legion.TaskRunning || !gt.Status.Ready {
		t.Fatalf("after the status write: spec %+v, status %+v", gt.Spec, gt.Status)
	}
}

// taskPart is what an agent's report reads of a task (the dispatcher's
// reportedTask).
type taskPart struct {
	Metadata struct {
		Version uint64 `json:"version"`
	} `json:"metadata"`
	Spec struct {
		Node string `json:"node"`
	} `json:"spec"`
	Status legion.TaskStatus `json:"status"`
}

// runningTask is a task in the default namespace, to run.
func runningTask(name string) *legion.Task {
	o, _ := legion.New(legion.KindTask)
	task := o.(*legion.Task)
	task.Metadata = legion.Metadata{Name: name, Namespace: "default"}
	task.Spec.DesiredState = legion.TaskRunning
	return task
}
