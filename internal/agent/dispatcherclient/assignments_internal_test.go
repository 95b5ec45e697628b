package dispatcherclient

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/internal/agent"
	legionpb "github.com/legionbsd/legion/internal/proto"
)

func TestDecodeTakesWholeSetsOnly(t *testing.T) {
	task := []byte(`{"apiVersion":"legion/v1","kind":"Task","metadata":{"name":"a-1","namespace":"web"},"spec":{"node":"node-a","desiredState":"running","pod":{"containers":[]}}}`)
	secret := []byte(`{"apiVersion":"legion/v1","kind":"Secret","metadata":{"name":"s","namespace":"web"},"spec":{}}`)
	for _, tc := range []struct {
		name    string
		set     *legionpb.AssignmentSet
		wantErr string
		want    []string
	}{
		{name: "whole", set: &legionpb.AssignmentSet{Tasks: [][]byte{task}, Values: map[string][]byte{"Secret/web/s": []byte("v")}}, want: []string{"web/a-1"}},
		{name: "empty", set: &legionpb.AssignmentSet{}, want: nil},
		{name: "a broken task", set: &legionpb.AssignmentSet{Version: 9, Tasks: [][]byte{task, []byte(`{"kind":`)}}, wantErr: "assignment set at version 9: task 1"},
		{name: "not a task", set: &legionpb.AssignmentSet{Version: 9, Tasks: [][]byte{secret}}, wantErr: "expected a Task, got a Secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as, err := decode(tc.set)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || as.Tasks != nil {
					t.Fatalf("decode: %v (tasks %v), want an error with %q and nothing decoded", err, as.Tasks, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, tk := range as.Tasks {
				got = append(got, tk.Metadata.Namespace+"/"+tk.Metadata.Name)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tasks (-want +got):\n%s", diff)
			}
			if len(as.Values) != len(tc.set.GetValues()) {
				t.Errorf("values %v, want %v", as.Values, tc.set.GetValues())
			}
		})
	}
}

// A burst of changes while the agent is busy costs one set, built when
// the agent is ready, holding every change; not a set per change (each
// copies every list of the node's state).
func TestSetsAreBuiltWhenTheAgentTakesThem(t *testing.T) {
	t.Parallel()
	f := newFollower()
	if err := f.take(&legionpb.AssignmentSet{Version: 1, Values: map[string][]byte{"v": []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	out := make(chan agent.Assignments)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		f.handOver(ctx, out)
	}()
	if got := string((<-out).Values["v"]); got != "0" {
		t.Fatalf("first set: value %q, want 0", got)
	}
	const changes = 100
	for i := 1; i <= changes; i++ {
		set := &legionpb.AssignmentSet{Version: uint64(1 + i), Delta: true,
			ValueChanges: &legionpb.Items{Put: legionpb.ItemsPut(map[string][]byte{"v": []byte(strconv.Itoa(i))})}}
		if err := f.take(set); err != nil {
			t.Fatal(err)
		}
	}
	// The agent takes sets until it holds the last change: at most the one
	// built when the burst began and one with the rest.
	taken := 1
	for {
		as := <-out
		taken++
		if string(as.Values["v"]) == strconv.Itoa(changes) {
			break
		}
		if taken > 3 {
			t.Fatalf("%d sets taken and the last change not in them (holds %q)", taken, as.Values["v"])
		}
	}
	f.mu.Lock()
	builds := f.builds
	f.mu.Unlock()
	if builds > 3 {
		t.Fatalf("%d sets built for 1 whole set and %d changes: want at most 3", builds, changes)
	}
}

// Peers sent (even none) reach the agent; a set without the field (a
// manager from before the mesh) leaves them nil, so wg0 is left alone.
func TestDecodePeers(t *testing.T) {
	as, err := decode(&legionpb.AssignmentSet{Peers: []byte(`[{"name":"n2","podCidr":"10.200.5.0/24","publicKey":"K2","endpoint":"192.0.2.5:51820"}]`)})
	if err != nil {
		t.Fatal(err)
	}
	if len(as.Peers) != 1 || as.Peers[0].Name != "n2" || as.Peers[0].PodCIDR != "10.200.5.0/24" || as.Peers[0].Endpoint != "192.0.2.5:51820" {
		t.Errorf("peers %+v", as.Peers)
	}
	if as, _ := decode(&legionpb.AssignmentSet{Peers: []byte(`[]`)}); as.Peers == nil {
		t.Error("an empty list sent must stay a list (remove every peer), not nil")
	}
	if as, _ := decode(&legionpb.AssignmentSet{}); as.Peers != nil {
		t.Errorf("no peers field must leave Peers nil, got %v", as.Peers)
	}
	if _, err := decode(&legionpb.AssignmentSet{Version: 4, Peers: []byte(`{`)}); err == nil || !strings.Contains(err.Error(), "version 4: peers") {
		t.Errorf("broken peers: %v", err)
	}
	as, err = decode(&legionpb.AssignmentSet{Policies: []byte(`{"isolation":{"vault":"locked"},"members":[{"namespace":"vault","task":"db-1","ip":"10.200.1.5","node":"n2"}]}`)})
	if err != nil || as.Policies == nil || as.Policies.Isolation["vault"] != "locked" || as.Policies.Members.Len() != 1 {
		t.Errorf("policies %+v, %v", as.Policies, err)
	}
	as, err = decode(&legionpb.AssignmentSet{Routes: []byte(`[{"namespace":"web","name":"site","host":"site.example","path":"/","backends":["10.200.0.2:8080"],"tlsSecret":"tls"}]`)})
	if err != nil || len(as.Routes) != 1 || as.Routes[0].Backends[0] != "10.200.0.2:8080" || as.Routes[0].TLSSecret != "tls" {
		t.Errorf("routes %+v, %v", as.Routes, err)
	}
	if _, err := decode(&legionpb.AssignmentSet{Version: 5, Routes: []byte(`[`)}); err == nil || !strings.Contains(err.Error(), "version 5: routes") {
		t.Errorf("broken routes: %v", err)
	}
	if as, _ := decode(&legionpb.AssignmentSet{}); as.Policies != nil {
		t.Errorf("no policies field must leave Policies nil, got %+v", as.Policies)
	}
}

func TestDecodeVolumes(t *testing.T) {
	vol := []byte(`{"apiVersion":"legion/v1","kind":"Volume","metadata":{"name":"db","namespace":"shop"},"spec":{"driver":"zfs"},"status":{"node":"node-a","backend":"zfs dataset tank/v"}}`)
	secret := []byte(`{"apiVersion":"legion/v1","kind":"Secret","metadata":{"name":"s","namespace":"web"},"spec":{}}`)
	as, err := decode(&legionpb.AssignmentSet{Volumes: [][]byte{vol}})
	if err != nil {
		t.Fatal(err)
	}
	if len(as.Volumes) != 1 || as.Volumes[0].Metadata.Name != "db" || as.Volumes[0].Status.Node != "node-a" || as.Volumes[0].Status.Backend != "zfs dataset tank/v" {
		t.Fatalf("volumes %+v, want shop/db bound to node-a", as.Volumes)
	}
	for _, bad := range [][]byte{secret, []byte(`{"kind":`)} {
		as, err := decode(&legionpb.AssignmentSet{Version: 4, Volumes: [][]byte{vol, bad}})
		if err == nil || !strings.Contains(err.Error(), "assignment set at version 4: entry 1 of volumes") || as.Volumes != nil {
			t.Errorf("decode of %s: %v (volumes %v), want the set refused naming the entry", bad, err, as.Volumes)
		}
	}
}

// A write that timed out on the stream's manager moves the stream only
// when the stream is quiet too: one that delivers is from a live manager
// whose store is slow, and leaving it costs a whole set.
func TestAStreamThatDeliversIsNotAbandoned(t *testing.T) {
	t.Parallel()
	s := &Session{cfg: Config{CallTimeout: time.Second}, log: slog.New(slog.DiscardHandler)}
	cut := false
	s.streamOn, s.cutStream = "m1", func() { cut = true }
	s.streamHeard = time.Now()
	s.abandon("m1")
	if cut {
		t.Fatal("a stream that delivered just now was left")
	}
	s.streamHeard = time.Now().Add(-2 * time.Second)
	s.abandon("m1")
	if !cut {
		t.Fatal("a stream quiet for longer than the call timeout was kept on a manager that did not answer")
	}
}

// The nodes of a cluster share the managers' streams out, each node
// always starting at the same one: when one manager goes, only its
// share of the nodes moves (and starts again with a whole set).
func TestStreamsAreSharedOutAmongManagers(t *testing.T) {
	t.Parallel()
	managers := []string{"m1:7470", "m2:7470", "m3:7470"}
	on := map[string]int{}
	for i := range 90 {
		s := &Session{cfg: Config{Node: fmt.Sprintf("node-%d", i)}, addrs: managers}
		first := s.streamAddr()
		on[first]++
		s.stream = ""
		if again := s.streamAddr(); again != first {
			t.Fatalf("node-%d starts at %s, then at %s", i, first, again)
		}
	}
	for _, m := range managers {
		if on[m] < 15 {
			t.Errorf("%d of 90 nodes follow %s (all: %v); want each manager a fair share", on[m], m, on)
		}
	}
}
