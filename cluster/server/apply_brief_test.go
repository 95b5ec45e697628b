package server

import (
	"context"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
)

// A brief apply answers each object's kind and metadata as stored, and
// neither its spec, its status nor the previous object; an apply that
// does not ask for it still gets the whole objects.
func TestBriefApplyAnswersMetadataOnly(t *testing.T) {
	t.Parallel()
	c, _ := soloCluster(t)
	ctx := context.Background()
	brief := client.ApplyOptions{Brief: true}

	// sameMeta checks that an answer names the object as stored and
	// carries none of its body.
	// A dry run answers the object as it would be: one generation on.
	sameMeta := func(what string, r client.Result, outcome string, generations uint64) *legion.Config {
		t.Helper()
		if r.Outcome != outcome {
			t.Fatalf("%s: outcome %s, want %s", what, r.Outcome, outcome)
		}
		got, ok := r.Object.(*legion.Config)
		if !ok {
			t.Fatalf("%s: answered a %T, want *legion.Config", what, r.Object)
		}
		stored, err := c.Get(ctx, legion.KindConfig, "default", "brief")
		if err != nil {
			t.Fatal(err)
		}
		sm, gm := stored.GetMetadata(), got.GetMetadata()
		if gm.Name != "brief" || gm.Namespace != "default" || gm.UID == "" || gm.UID != sm.UID ||
			gm.Version != sm.Version || gm.Generation != sm.Generation+generations || gm.Labels["tier"] != "front" {
			t.Fatalf("%s: metadata %+v, stored %+v", what, *gm, *sm)
		}
		if got.Spec.Text != "" || got.Spec.Data != nil {
			t.Fatalf("%s: a brief answer carried the spec: %+v", what, got.Spec)
		}
		if r.Previous != nil {
			t.Fatalf("%s: a brief answer carried the previous object", what)
		}
		return got
	}
	obj := func(text string) *legion.Config {
		o := configObj("default", "brief", text)
		o.Metadata.Labels = map[string]string{"tier": "front"}
		return o
	}

	r, err := c.ApplyOne(ctx, obj("one"), brief)
	if err != nil {
		t.Fatal(err)
	}
	first := sameMeta("create", r, client.Created, 0)
	if first.Metadata.Generation != 1 {
		t.Fatalf("created at generation %d", first.Metadata.Generation)
	}

	if r, err = c.ApplyOne(ctx, obj("two"), client.ApplyOptions{Brief: true, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	sameMeta("dry run", r, client.Updated, 1)
	if r, err = c.ApplyOne(ctx, obj("two"), brief); err != nil {
		t.Fatal(err)
	}
	second := sameMeta("update", r, client.Updated, 0)
	if second.Metadata.Generation != 2 || second.Metadata.Version <= first.Metadata.Version {
		t.Fatalf("update answered generation %d version %d after %d", second.Metadata.Generation, second.Metadata.Version, first.Metadata.Version)
	}
	if r, err = c.ApplyOne(ctx, obj("two"), brief); err != nil {
		t.Fatal(err)
	}
	sameMeta("unchanged", r, client.Unchanged, 0)

	// Without Brief: the whole object and what was stored before.
	r, err = c.ApplyOne(ctx, obj("three"), client.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Object.(*legion.Config).Spec.Data) != "three" || r.Previous == nil || string(r.Previous.(*legion.Config).Spec.Data) != "two" {
		t.Fatalf("full answer: object %+v previous %+v", r.Object, r.Previous)
	}
}
