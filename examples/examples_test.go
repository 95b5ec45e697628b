// Package examples holds Legion's example manifests; this test checks that
// every one passes admission and stores exactly what its golden file says.
package examples_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestExamplesAdmitAndMatchGolden(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 6 {
		t.Fatalf("found %d example manifests, expected at least 6", len(files))
	}
	kinds := map[legion.Kind]bool{}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			objs, err := legion.ParseManifest(f, data)
			if err != nil {
				t.Fatalf("admission refused the example:\n%v", err)
			}
			var out bytes.Buffer
			for i, o := range objs {
				kinds[o.GetKind()] = true
				y, err := legion.MarshalYAML(o)
				if err != nil {
					t.Fatal(err)
				}
				if i > 0 {
					out.WriteString("---\n")
				}
				out.Write(y)
			}
			golden := filepath.Join("testdata", "golden", strings.TrimSuffix(f, ".yaml")+".yaml")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./examples -update to write it)", err)
			}
			if d := cmp.Diff(string(want), out.String()); d != "" {
				t.Errorf("normalised %s differs from %s (-want +got):\n%s", f, golden, d)
			}
			// The normalised form is a fixed point: admitting it again
			// stores the same bytes.
			again, err := legion.ParseManifest(golden, out.Bytes())
			if err != nil {
				t.Fatalf("the normalised output does not pass admission:\n%v", err)
			}
			for i := range again {
				a, _ := legion.MarshalJSON(objs[i])
				b, _ := legion.MarshalJSON(again[i])
				if !bytes.Equal(a, b) {
					t.Errorf("object %d changed on a second admission:\n%s\n%s", i, a, b)
				}
			}
		})
	}
	t.Run("every user kind has an example", func(t *testing.T) {
		for _, k := range legion.Kinds() {
			if k == legion.KindTask {
				continue
			}
			if !kinds[k] {
				t.Errorf("no example of kind %s", k)
			}
		}
	})
}
