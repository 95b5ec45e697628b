package dispatcherclient

import (
	"slices"
	"testing"

	"github.com/legionbsd/legion/internal/agent"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/protobuf/proto"
)

// A delta's parts that came whole are counted, those shared with other
// nodes' deltas (merged in as the delta is taken) among them; parts that
// came as changes are not.
func TestWholePartsCountsThePartsADeltaReplaced(t *testing.T) {
	t.Parallel()
	routes := &legionpb.Items{Replace: true, Put: legionpb.ItemsPut(map[string][]byte{"shop\x00web": []byte(`{"namespace":"shop","name":"web"}`)})}
	shared, err := proto.Marshal(&legionpb.AssignmentSet{RouteChanges: routes})
	if err != nil {
		t.Fatal(err)
	}
	values := &legionpb.Items{Replace: true, Put: legionpb.ItemsPut(map[string][]byte{"Secret/shop/token": []byte("s3cret")})}
	set := &legionpb.AssignmentSet{Delta: true, Version: 7, Term: 2, Shared: shared, ValueChanges: values,
		PeerChanges: &legionpb.Items{Removed: []string{"node-9"}}}
	if err := stateOf(agent.Assignments{}).apply(set); err != nil {
		t.Fatal(err)
	}
	got := wholeParts(set)
	want := []WholePart{{"value", proto.Size(values)}, {"route", proto.Size(routes)}}
	if !slices.Equal(got, want) {
		t.Fatalf("wholeParts = %v, want %v (the values, and the routes shared)", got, want)
	}
}
