package compose

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/legionbsd/legion"
)

// FuzzConvert feeds compose text to the converter: it must not panic, and
// must give either an error or objects that pass admission as they are.
// The seeds are the golden and corpus files.
func FuzzConvert(f *testing.F) {
	for _, root := range []string{"testdata/golden", "testdata/corpus"} {
		dirs, _ := filepath.Glob(filepath.Join(root, "*", "compose.yaml"))
		for _, p := range dirs {
			data, err := os.ReadFile(p)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	env := map[string]string{"TAG": "1.0", "POSTGRES_PASSWORD": "pw", "API_KEY": "k", "MYSQL_PASSWORD": "pw", "EMPTY_VAR": ""}
	read := func(name string) ([]byte, error) { return []byte("KEY=value\n"), nil }
	f.Fuzz(func(t *testing.T, data []byte) {
		res, err := Convert(context.Background(), []File{{Name: "compose.yaml", Content: data}},
			Options{Stack: "fuzz", Env: env, ReadFile: read})
		if err != nil {
			return
		}
		for _, o := range res.Objects {
			c := legion.Clone(o)
			if err := legion.Admit(c); err != nil {
				t.Fatalf("%s %s does not pass admission: %v", o.GetKind(), o.GetMetadata().Name, err)
			}
		}
		text, err := Render(res.Objects)
		if err != nil {
			t.Fatalf("rendering: %v", err)
		}
		if _, err := legion.ParseManifest("fuzz", text); err != nil {
			t.Fatalf("ParseManifest refuses the rendering: %v\n%s", err, text)
		}
	})
}
