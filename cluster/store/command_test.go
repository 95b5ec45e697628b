package store

import (
	"encoding/json"
	"testing"

	"github.com/legionbsd/legion"
)

// A command's encoding is json.Marshal's, byte for byte: replicas running
// an older build decode it, and raft's log holds both.
func TestCommandEncodingIsJSONMarshal(t *testing.T) {
	t.Parallel()
	odd := config("default", "a<b>&c\u2028", "<script>&\"é\x00")
	odd.Metadata.Labels = map[string]string{"z": "1", "a": "<&>"}
	obj, err := legion.MarshalJSON(odd)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := legion.MarshalJSON(config("default", "a", "one"))
	for _, c := range []command{
		{Op: opPut, Kind: legion.KindConfig, Namespace: "default", Name: "a", Object: plain},
		{Op: opPut, Kind: legion.KindNode, Name: "n1", Object: plain, KeepStatus: true},
		{Op: opPut, Kind: legion.KindConfig, Namespace: "default", Name: "a<b>&c\u2028", Object: obj, MustNotExist: true},
		{Op: opStatus, Kind: legion.KindConfig, Namespace: "default", Name: "a", Object: obj, Version: 12345},
		{Op: opPut, Kind: legion.KindConfig, Namespace: "default", Name: "a", Object: plain, Version: 7, KeepStatus: true,
			Requires: []Requirement{{Kind: legion.KindService, Namespace: "default", Name: "web", UID: "u"}, {Kind: legion.KindNode, Name: "n"}}},
		{Op: opDelete, Kind: legion.KindConfig, Namespace: "default", Name: "a", Version: 3},
	} {
		want, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.encode()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("encoded\n%s\njson.Marshal\n%s", got, want)
		}
	}
}
