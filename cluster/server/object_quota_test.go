package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/codes"
)

func configYAML(ns, name, text string) string {
	return "apiVersion: legion/v1\nkind: Config\nmetadata: {name: " + name + ", namespace: " + ns + "}\nspec: {text: " + text + "}\n"
}

// TestAdmissionObjectQuota: quota.objects bounds how many objects a
// namespace holds, of every kind but Task, so its users cannot fill the
// managers' store; changing what is there goes on at the limit, and a
// deletion makes room.
func TestAdmissionObjectQuota(t *testing.T) {
	t.Parallel()
	m, admin, mallory := teamUser(t) // team holds mallory's RoleBinding
	ctx := context.Background()
	ns, _ := legion.New(legion.KindNamespace)
	ns.GetMetadata().Name = "team"
	three := 3
	ns.(*legion.Namespace).Spec.Quota = &legion.Quota{Objects: &three}
	if _, err := admin.ApplyOne(ctx, ns, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	applyOK(t, mallory, configYAML("team", "a", "1")+"---\n"+configYAML("team", "b", "1"))
	applyRefused(t, m, mallory, configYAML("team", "c", "1"), codes.ResourceExhausted,
		"over the quota of namespace team: objects 4 of 3, applying Config c (it holds 3: every kind but Task)")
	applyRefused(t, m, admin, configYAML("team", "c", "1")+"---\n"+configYAML("team", "a", "2"), codes.ResourceExhausted,
		"objects 4 of 3, applying Config c")
	applyOK(t, mallory, configYAML("team", "a", "2")) // a change, not a new object
	applyOK(t, admin, configYAML("other", "c", "1"))  // another namespace
	if _, err := mallory.Delete(ctx, legion.KindConfig, "team", "b", nil); err != nil {
		t.Fatal(err)
	}
	applyOK(t, mallory, configYAML("team", "c", "1"))

	// Applies racing for the last place are admitted one at a time: one
	// takes it.
	if _, err := mallory.Delete(ctx, legion.KindConfig, "team", "c", nil); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := mallory.Apply(ctx, mustParse(t, configYAML("team", fmt.Sprintf("race-%d", i), "1")), client.ApplyOptions{})
			errs <- err
		}()
	}
	took := 0
	for range 8 {
		err := <-errs
		switch {
		case err == nil:
			took++
		case client.Code(err) != codes.ResourceExhausted:
			t.Fatalf("a racing apply: %v", err)
		}
	}
	if n, err := m.s.store().Count(legion.KindConfig, "team"); took != 1 || err != nil || n != 2 {
		t.Fatalf("%d racing applies took the last place, %d Configs held (%v): want 1 and 2", took, n, err)
	}
}
