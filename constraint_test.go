package legion

import "testing"

func TestParseConstraint(t *testing.T) {
	t.Parallel()
	good := []struct{ in, canon string }{
		{"node.labels.disk == ssd", "node.labels.disk == ssd"},
		{"node.labels.disk==ssd", "node.labels.disk == ssd"},
		{"  node.labels.example.org/rack !=  r1 ", "node.labels.example.org/rack != r1"},
		{"node.name == node-1", "node.name == node-1"},
		{"node.hostname != h1.example.org", "node.hostname != h1.example.org"},
		{"node.role == manager", "node.role == manager"},
		{"node.platform.os == freebsd", "node.platform.os == freebsd"},
		{"node.platform.arch == arm64", "node.platform.arch == arm64"},
		{"node.platform.linux == TRUE", "node.platform.linux == true"},
		{"node.platform.linux != 0", "node.platform.linux != false"},
	}
	for _, g := range good {
		c, err := ParseConstraint(g.in)
		if err != nil {
			t.Errorf("ParseConstraint(%q): %v", g.in, err)
			continue
		}
		if c.String() != g.canon {
			t.Errorf("ParseConstraint(%q) = %q, want %q", g.in, c, g.canon)
		}
		again, err := ParseConstraint(c.String())
		if err != nil || again != c {
			t.Errorf("canonical %q does not parse back to the same: %+v %v", c, again, err)
		}
	}
	bad := []string{"", "node.labels.disk", "node.labels.disk = ssd", "node.labels. == x", "node.zone == a",
		"node.labels.disk == ", "node.role == boss", "node.platform.linux == maybe", "node.name == a == b",
		"node.labels.disk == s d", "labels.disk == ssd", "node.labels.-x == y"}
	for _, b := range bad {
		if c, err := ParseConstraint(b); err == nil {
			t.Errorf("ParseConstraint(%q) = %+v, want an error", b, c)
		}
	}
}

func TestConstraintEval(t *testing.T) {
	t.Parallel()
	n := &Node{}
	n.Metadata.Name = "node-1"
	n.Metadata.Labels = map[string]string{"disk": "ssd", "zone": "a"}
	n.Spec.Role = RoleManager
	n.Status.Hostname = "h1"
	n.Status.Platform = Platform{OS: "freebsd", Arch: "amd64", Linux: true}
	cases := []struct {
		c    string
		want bool
	}{
		{"node.labels.disk == ssd", true}, {"node.labels.disk != ssd", false},
		{"node.labels.disk == hdd", false}, {"node.labels.disk != hdd", true},
		{"node.labels.gpu == yes", false}, {"node.labels.gpu != yes", true}, // a missing label equals nothing
		{"node.name == node-1", true}, {"node.name != node-1", false}, {"node.name == node-2", false},
		{"node.hostname == h1", true}, {"node.role == manager", true}, {"node.role == worker", false},
		{"node.platform.os == freebsd", true}, {"node.platform.arch == arm64", false},
		{"node.platform.linux == true", true}, {"node.platform.linux == false", false}, {"node.platform.linux != false", true},
	}
	for _, c := range cases {
		con, err := ParseConstraint(c.c)
		if err != nil {
			t.Fatal(err)
		}
		if got := con.Eval(n); got != c.want {
			t.Errorf("%q on the node = %v, want %v", c.c, got, c.want)
		}
	}
	n.Status.Platform.Linux = false
	con, _ := ParseConstraint("node.platform.linux == true")
	if con.Eval(n) {
		t.Error("a node without --linux matched node.platform.linux == true")
	}
	list, err := ParseConstraints([]string{"node.labels.zone == a", "node.role == manager"})
	if err != nil || len(list) != 2 {
		t.Fatalf("ParseConstraints: %v %v", list, err)
	}
	if _, err := ParseConstraints([]string{"node.labels.zone == a", "bad"}); err == nil {
		t.Error("ParseConstraints accepted a bad constraint")
	}
}
