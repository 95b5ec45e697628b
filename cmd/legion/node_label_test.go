package main

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
)

// node label sets and removes a node's labels, node update changes its
// availability and labels as docker node update does, and bad input is
// refused naming what was expected, with nothing written.
func TestNodeLabelAndUpdate(t *testing.T) {
	n := startCluster(t)
	flags := []string{"--server", n.API, "--credentials", n.Admin}
	run := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }
	labels := func() map[string]string {
		t.Helper()
		o, err := n.Client.Get(context.Background(), legion.KindNode, "", n.Name)
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Node).Metadata.Labels
	}
	if out, err := run("node", "label", n.Name, "zone=a", "disk=ssd"); err != nil || !strings.Contains(out, "disk=ssd zone=a") {
		t.Fatalf("node label: %v\n%s", err, out)
	}
	if out, err := run("node", "label", n.Name, "disk-"); err != nil || labels()["disk"] != "" || labels()["zone"] != "a" {
		t.Fatalf("node label disk-: %v %v\n%s", err, labels(), out)
	}
	if out, err := run("node", "update", n.Name, "--availability", "pause", "--label-add", "rack=r1", "--label-rm", "zone"); err != nil {
		t.Fatalf("node update: %v\n%s", err, out)
	}
	o, _ := n.Client.Get(context.Background(), legion.KindNode, "", n.Name)
	if nd := o.(*legion.Node); nd.Spec.Availability != legion.AvailabilityPause || nd.Metadata.Labels["rack"] != "r1" || nd.Metadata.Labels["zone"] != "" {
		t.Fatalf("after node update: %v %v", nd.Spec.Availability, nd.Metadata.Labels)
	}
	before := labels()
	for _, bad := range [][]string{
		{"node", "label", n.Name, "novalue"},
		{"node", "label", n.Name, "k=v", "k-"},
		{"node", "label", n.Name, "Bad Key=v"},
		{"node", "update", n.Name, "--availability", "gone"},
		{"node", "update", n.Name},
	} {
		if out, err := run(bad...); err == nil {
			t.Errorf("%v accepted:\n%s", bad, out)
		}
	}
	if after := labels(); len(after) != len(before) || after["rack"] != before["rack"] {
		t.Fatalf("a refused change wrote labels: %v, were %v", after, before)
	}
}
