package topui

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/golden"
)

// legion top --once on the known cluster: every view as text.
func TestOnceGolden(t *testing.T) {
	t.Parallel()
	golden.Check(t, "testdata/once.golden", Once(fixture(t), 160))
}

// A kind the caller may not list, and events the cluster cannot give,
// are said under their tab rather than shown as empty.
func TestOnceSaysWhatItCouldNotRead(t *testing.T) {
	t.Parallel()
	d := fixture(t)
	delete(d.Objects, legion.KindSecret)
	d.Denied = map[legion.Kind]string{legion.KindSecret: "permission denied: vera may not read secrets in shop"}
	d.Events = nil
	d.Note = map[string]string{"events": "not available from this cluster"}
	out := Once(d, 160)
	for _, want := range []string{"secrets: not listed: permission denied: vera may not read secrets in shop",
		"events: not available from this cluster"} {
		if !strings.Contains(out, want) {
			t.Errorf("--once does not say %q:\n%s", want, out)
		}
	}
}

// A user who may not list nodes (they are cluster-scoped) is not shown a
// cluster of no nodes with no CPU: the header says they are not listed.
func TestOnceWithoutNodes(t *testing.T) {
	t.Parallel()
	d := fixture(t)
	delete(d.Objects, legion.KindNode)
	d.Denied = map[legion.Kind]string{legion.KindNode: "user bob: Nodes are cluster-scoped and users act in namespaces only"}
	out := Once(d, 160)
	for _, want := range []string{"nodes not listed   tasks ", "CPU    not known: nodes not listed", "MEMORY not known: nodes not listed",
		"nodes: not listed: user bob: Nodes are cluster-scoped"} {
		if !strings.Contains(out, want) {
			t.Errorf("--once does not say %q:\n%s", want, out)
		}
	}
	for _, wrong := range []string{"nodes 0", " of 0"} {
		if strings.Contains(out, wrong) {
			t.Errorf("--once says %q of nodes it could not list:\n%s", wrong, out)
		}
	}
}

// A Secret's value is dropped as it arrives; only its size is kept.
func TestSecretValuesDropped(t *testing.T) {
	t.Parallel()
	d := fixture(t)
	s := d.Objects[legion.KindSecret][0].(*legion.Secret)
	if len(s.Spec.Data) != 0 || s.Spec.Text != "" {
		t.Fatalf("secret value kept: %q %q", s.Spec.Data, s.Spec.Text)
	}
	if got := d.SecretSizes["shop/shop-tls"]; got != len("-----BEGIN CERTIFICATE----- not really") {
		t.Errorf("secret size %d", got)
	}
}
