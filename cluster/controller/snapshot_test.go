package controller

import (
	"context"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/scheduler"
)

// joiningStore is a store in which, right after the first list of Nodes
// or Volumes, node n2 joins and claims Volume data: what a snapshot read
// kind by kind can catch half of.
type joiningStore struct {
	joined bool
	order  []legion.Kind
}

func (s *joiningStore) List(kind legion.Kind, _ string, _ func(legion.Object) bool) ([]legion.Object, uint64, error) {
	var out []legion.Object
	switch kind {
	case legion.KindNode:
		out = append(out, testNode("n1"))
		if s.joined {
			out = append(out, testNode("n2"))
		}
	case legion.KindVolume:
		v := &legion.Volume{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindVolume,
			Metadata: legion.Metadata{Name: "data", Namespace: legion.DefaultNamespace, Version: 1}},
			Spec: legion.VolumeSpec{Driver: legion.DriverZFS}}
		if s.joined {
			v.Metadata.Version = 2
			v.Status.Node = "n2"
		}
		out = append(out, v)
	}
	if kind == legion.KindNode || kind == legion.KindVolume {
		s.order = append(s.order, kind)
		s.joined = true
	}
	return out, 0, nil
}

func (s *joiningStore) WriteAll(context.Context, []store.Write) []error      { return nil }
func (s *joiningStore) Watch(uint64, ...legion.Kind) (*store.Watcher, error) { return nil, nil }
func (s *joiningStore) AppliedIndex() uint64                                 { return 0 }
func (s *joiningStore) CountOf([]legion.Kind, string) (int, error)           { return 0, nil }

func testNode(name string) *legion.Node {
	return &legion.Node{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindNode,
		Metadata: legion.Metadata{Name: name, Version: 1}}}
}

// The planner frees the Volumes of a node missing from its snapshot, so
// the snapshot must never show a Volume bound to a node newer than the
// node list: Volumes are read before Nodes.
func TestSnapshotNeverShowsAVolumeBoundToANodeItLacks(t *testing.T) {
	t.Parallel()
	s := &joiningStore{}
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	l := &Loop{Store: s, Now: func() time.Time { return now }, LeaderSince: now}
	st, err := l.Snapshot(now)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range scheduler.Plan(st, now).UpdateVolumes {
		if v.Metadata.Name == "data" {
			t.Fatalf("the plan rewrites Volume data (%+v): its node was taken for removed", v.Status)
		}
	}
	if len(s.order) != 2 || s.order[0] != legion.KindVolume {
		t.Fatalf("read order %v, want Volume before Node", s.order)
	}
}
