package legion

import (
	"bytes"
	"encoding/json"
	"math"
	"math/big"
	"strings"
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
		// Whole numbers take a path of their own: it must read what exact
		// arithmetic reads, and refuse what it refuses.
		c, cerr := ParseCPU(s)
		if want, ok := exactQuantity(strings.TrimSpace(s), nil, 1000); ok {
			fits := want.IsInt64() && want.Int64() <= math.MaxInt64/2
			if fits != (cerr == nil) || fits && int64(c) != want.Int64() {
				t.Fatalf("CPU %q: got %v, %v; exactly %s", s, c, cerr, want)
			}
		}
		b, berr := ParseBytes(s)
		if want, ok := exactQuantity(strings.TrimSpace(s), byteUnits, 1); ok {
			fits := want.IsInt64()
			if fits != (berr == nil) || fits && int64(b) != want.Int64() {
				t.Fatalf("Bytes %q: got %v, %v; exactly %s", s, b, berr, want)
			}
		}
	})
}

// byteUnits are ParseBytes' suffixes, binary ones first, as it tries them.
var byteUnits = map[string]*big.Int{"Ki": big.NewInt(1 << 10), "Mi": big.NewInt(1 << 20), "Gi": big.NewInt(1 << 30),
	"Ti": big.NewInt(1 << 40), "Pi": big.NewInt(1 << 50), "Ei": big.NewInt(1 << 60), "k": big.NewInt(1e3), "M": big.NewInt(1e6),
	"G": big.NewInt(1e9), "T": big.NewInt(1e12), "P": big.NewInt(1e15), "E": big.NewInt(1e18)}

// exactQuantity is s, a whole number (at most 18 digits, nothing else)
// with one of units' suffixes or none, times mult and its unit, in exact
// arithmetic; ok is false for anything else.
func exactQuantity(s string, units map[string]*big.Int, mult int64) (*big.Int, bool) {
	unit := big.NewInt(1)
	for _, n := range []int{2, 1} {
		if len(s) > n {
			if u, found := units[s[len(s)-n:]]; found {
				s, unit = s[:len(s)-n], u
				break
			}
		}
	}
	if s == "" || len(s) > 18 || strings.Trim(s, "0123456789") != "" {
		return nil, false
	}
	v, _ := new(big.Int).SetString(s, 10)
	return v.Mul(v.Mul(v, unit), big.NewInt(mult)), true
}

// FuzzJSONString: the quick reading of a JSON string reads what the
// decoder reads, and fails where it fails.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`"500m"`, `"1Gi"`, `""`, `"a\"b"`, `"\u00e9"`, `"é"`, "\"\x01\"", `"`, `"a"b"`, `5`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := jsonString(b)
		var want string
		werr := json.Unmarshal(b, &want)
		if (err == nil) != (werr == nil) || err == nil && got != want {
			t.Fatalf("%q: read %q, %v; the decoder reads %q, %v", b, got, err, want, werr)
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
