package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// bigService is an admitted Service whose encoding is just under
// legion.MaxObjectSize.
func bigService(t *testing.T) *legion.Service {
	t.Helper()
	o, _ := legion.New(legion.KindService)
	s := o.(*legion.Service)
	s.Metadata = legion.Metadata{Name: "big", Namespace: "default"}
	s.Spec.Pod.Containers = []legion.Container{{Name: "web", Image: "nginx"}}
	if err := legion.Admit(s); err != nil {
		t.Fatal(err)
	}
	data, _ := legion.MarshalJSON(s)
	for i := 0; len(data) < legion.MaxObjectSize-70_000; i++ {
		s.Spec.Pod.Containers = append(s.Spec.Pod.Containers, legion.Container{Name: fmt.Sprintf("c%d", i), Image: "nginx",
			Command: []string{strings.Repeat("x", 60_000)}})
		data, _ = legion.MarshalJSON(s)
	}
	if err := legion.Admit(s); err != nil {
		t.Fatalf("the big service is not admitted: %v", err)
	}
	return s
}

// The largest object admission lets through is stored, and so is a
// controller's status holding two more copies of its spec; an entry over
// MaxEntry is refused before it is proposed, and writes go on.
func TestEntriesOverTheLimitAreNeverProposed(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	s := bigService(t)
	stored, _, err := n.s.Put(ctx, s, WriteOptions{})
	if err != nil {
		t.Fatalf("an object at the object limit: %v", err)
	}
	st := legion.Clone(stored).(*legion.Service)
	spec, prev := st.Spec, st.Spec
	st.Status = legion.ServiceStatus{Spec: &spec, Update: &legion.UpdateStatus{State: legion.UpdateUpdating, PreviousSpec: &prev}}
	stored, err = n.s.PutStatus(ctx, st, Precondition{Version: stored.GetMetadata().Version})
	if err != nil {
		t.Fatalf("a status with two copies of a spec at the object limit: %v", err)
	}

	before := n.s.Raft().LastIndex()
	huge := legion.Clone(stored).(*legion.Service)
	huge.Status.Message = strings.Repeat("m", MaxEntry)
	_, err = n.s.PutStatus(ctx, huge, Precondition{Version: stored.GetMetadata().Version})
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("at most %d allowed", MaxEntry)) {
		t.Fatalf("a status write over the entry limit: %v", err)
	}
	if after := n.s.Raft().LastIndex(); after != before {
		t.Fatalf("the refused write reached the log: last index %d -> %d", before, after)
	}
	c, _ := legion.New(legion.KindConfig)
	c.GetMetadata().Name, c.GetMetadata().Namespace = "after", "default"
	c.(*legion.Config).Spec.Data = []byte("x")
	if _, _, err := n.s.Put(ctx, c, WriteOptions{}); err != nil {
		t.Fatalf("a write after the refusal: %v", err)
	}
}

// The bulk path checks each entry against MaxEntry as Put does: the one
// too large is refused, the others in the same call are written.
func TestBulkWritesAreHeldToTheEntryLimit(t *testing.T) {
	t.Parallel()
	n := single(t)
	ctx := context.Background()
	small, _ := legion.New(legion.KindConfig)
	small.GetMetadata().Name, small.GetMetadata().Namespace = "small", "default"
	small.(*legion.Config).Spec.Data = []byte("x")
	huge := bigService(t)
	huge.Status.Message = strings.Repeat("m", MaxEntry)
	before := n.s.Raft().LastIndex()
	errs := n.s.WriteAll(ctx, []Write{{Object: huge}, {Object: small}})
	if !errors.Is(errs[0], ErrTooLarge) {
		t.Fatalf("a bulk write over the entry limit: %v, want ErrTooLarge", errs[0])
	}
	if errs[1] != nil {
		t.Fatalf("the small write beside it: %v", errs[1])
	}
	if after := n.s.Raft().LastIndex(); after != before+1 {
		t.Fatalf("last index %d -> %d: want exactly the small write appended", before, after)
	}
}
