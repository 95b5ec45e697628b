package legion

import (
	"bytes"
	"testing"
)

// FuzzDecode: any input either fails with errors or admits to objects
// whose normalised form is a fixed point of admission.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(minimalService))
	f.Add([]byte(webServiceManifest))
	f.Add([]byte(`{"apiVersion":"legion/v1","kind":"Secret","metadata":{"name":"s"},"spec":{"text":"x"}}`))
	f.Add([]byte("apiVersion: legion/v1\nkind: CronJob\nmetadata: {name: c}\nspec: {schedule: '* * * * *', job: {pod: {containers: [{name: a, image: b}]}}}\n"))
	f.Add([]byte("apiVersion: legion/v1\nkind: NetworkPolicy\nmetadata: {name: p}\nspec: {egress: [{to: [{cidr: 10.0.0.0/8}]}]}\n---\nkind: Route\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, _ := ParseManifest("fuzz", data)
		for _, o := range objs {
			y, err := MarshalYAML(o)
			if err != nil {
				t.Fatalf("an admitted %s does not encode: %v", o.GetKind(), err)
			}
			again, err := ParseManifest("again", y)
			if err != nil || len(again) != 1 {
				t.Fatalf("the normalised form of an admitted object is refused: %v\n%s", err, y)
			}
			a, _ := MarshalJSON(o)
			b, _ := MarshalJSON(again[0])
			if !bytes.Equal(a, b) {
				t.Fatalf("admission is not a fixed point:\n%s\n%s", a, b)
			}
		}
	})
}

// FuzzQuantity: whatever parses has a canonical form that parses back to
// the same amount.
func FuzzQuantity(f *testing.F) {
	for _, s := range []string{"0.5", "500m", "1", "1Gi", "1.5Gi", "1073741824", "1G", "1500k", "0", "-1", "1e3", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if c, err := ParseCPU(s); err == nil {
			back, err := ParseCPU(c.String())
			if err != nil || back != c {
				t.Fatalf("CPU %q -> %s -> %v, %v", s, c, back, err)
			}
		}
		if b, err := ParseBytes(s); err == nil {
			back, err := ParseBytes(b.String())
			if err != nil || back != b {
				t.Fatalf("Bytes %q -> %s -> %v, %v", s, b, back, err)
			}
		}
		if d, err := ParseDuration(s); err == nil {
			back, err := ParseDuration(d.String())
			if err != nil || back != d {
				t.Fatalf("Duration %q -> %s -> %v, %v", s, d, back, err)
			}
		}
	})
}

// FuzzConstraint: whatever parses renders canonically, parses back to the
// same constraint, and evaluates without panicking.
func FuzzConstraint(f *testing.F) {
	for _, s := range []string{"node.labels.disk == ssd", "node.role!=worker", "node.platform.linux == true", "node.labels.a/b == c", "x == y"} {
		f.Add(s)
	}
	n := &Node{}
	n.Metadata.Name = "n"
	n.Metadata.Labels = map[string]string{"disk": "ssd"}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseConstraint(s)
		if err != nil {
			return
		}
		back, err := ParseConstraint(c.String())
		if err != nil || back != c {
			t.Fatalf("%q -> %q -> %+v, %v", s, c, back, err)
		}
		opposite := c
		opposite.Equal = !c.Equal
		if c.Eval(n) == opposite.Eval(n) {
			t.Fatalf("%q and its negation agree on a node", c)
		}
	})
}
