package topui

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/legionbsd/legion"
)

// fixture is the known cluster of testdata: its objects, the usage its
// nodes reported and its events, read at a fixed time.
func fixture(t testing.TB) Data {
	t.Helper()
	data, err := os.ReadFile("testdata/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := legion.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	d := Data{Objects: map[legion.Kind][]legion.Object{}}
	for _, doc := range docs {
		if len(doc.Errs) > 0 || doc.Object == nil {
			t.Fatalf("testdata/cluster.yaml document %d: %v", doc.Index, doc.Errs)
		}
		d.Objects[doc.Object.GetKind()] = append(d.Objects[doc.Object.GetKind()], doc.Object)
	}
	raw, err := os.ReadFile("testdata/usage.json")
	if err != nil {
		t.Fatal(err)
	}
	var u struct {
		Now    time.Time
		Usage  []legion.Usage
		Events []legion.Event
	}
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatal(err)
	}
	d.Now, d.Usage, d.Events = u.Now, u.Usage, u.Events
	d.Managers = []Manager{{Name: "alpha", Leader: true, State: "Leader"}}
	d.DropSecretValues()
	return d
}
