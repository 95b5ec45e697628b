package jsonfast_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/internal/jsonfast"
)

// targets are the types decoded through this package, each made new for
// every decode.
var targets = map[string]func() any{
	"Task":          func() any { return new(legion.Task) },
	"Config":        func() any { return new(legion.Config) },
	"Service":       func() any { return new(legion.Service) },
	"AppendEntries": func() any { return new(raft.AppendEntriesRequest) },
	"Members":       func() any { return new([]*endpoints.Member) },
}

// seeds are documents of each target as encoding/json writes them, and
// some it would not write.
func seeds(t testing.TB) [][]byte {
	task, _ := legion.New(legion.KindTask)
	tk := task.(*legion.Task)
	tk.Metadata.Name, tk.Metadata.Namespace, tk.Metadata.Version = "web-1", "default", 42
	tk.Metadata.Labels = map[string]string{"app": "web", "tier": "front"}
	tk.Spec.Node, tk.Spec.DesiredState = "n1", legion.TaskRunning
	tk.Status.State, tk.Status.IP = legion.TaskRunning, "10.1.0.5"
	cfg, _ := legion.New(legion.KindConfig)
	cfg.(*legion.Config).Metadata.Name = "settings"
	cfg.(*legion.Config).Spec.Data = []byte(strings.Repeat("x\x00\xff", 100))
	ae := &raft.AppendEntriesRequest{Term: 3, PrevLogEntry: 7, LeaderCommitIndex: 7, Entries: []*raft.Log{
		{Index: 8, Term: 3, Type: raft.LogCommand, Data: []byte(`{"op":"put"}`), AppendedAt: time.Unix(1700000000, 123).UTC()},
	}}
	members := []*endpoints.Member{{Namespace: "default", Service: "web", Task: "web-1", IP: "10.1.0.5", Node: "n1"}}
	var out [][]byte
	for _, v := range []any{tk, cfg, ae, members} {
		data, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, data)
	}
	return append(out,
		[]byte(`{"KIND":"Task","metadata":{"name":"a","name":"b"},"spec":{"node":"n\u00e9"}}`), // case, duplicates, escapes
		[]byte(`{"spec":{"data":"!!"}}`),            // not base64
		[]byte(`{"metadata":{"version":-1}}`),       // out of range
		[]byte(`[{"ip":"10.0.0.1"},null,{"ip":5}]`), // wrong type inside
		[]byte(`{"term":1} trailing`),
		[]byte("{\"spec\":{\"text\":\"\xff\xfe\"}}"), // invalid UTF-8
		[]byte(`{"entries":[{"AppendedAt":"yesterday"}]}`),
	)
}

// TestUnmarshalAsEncodingJSON holds Unmarshal to encoding/json's answers:
// the same value when it decodes, an error when it refuses, and an error
// for a mistyped field that names the field and the type, as
// encoding/json's does.
func TestUnmarshalAsEncodingJSON(t *testing.T) {
	for _, data := range seeds(t) {
		for name, mk := range targets {
			compare(t, name, mk, data)
		}
	}
	var a, b legion.Task
	in := []byte(`{"metadata":{"name":5}}`)
	e1, e2 := json.Unmarshal(in, &a), jsonfast.Unmarshal(in, &b)
	for _, part := range []string{"cannot unmarshal number", "metadata.name", "of type string"} {
		if e1 == nil || e2 == nil || !strings.Contains(e1.Error(), part) || !strings.Contains(e2.Error(), part) {
			t.Errorf("mistyped field: encoding/json says %v, Unmarshal says %v; want both to say %q", e1, e2, part)
		}
	}
}

func FuzzUnmarshalAsEncodingJSON(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, mk := range targets {
			compare(t, name, mk, data)
		}
	})
}

func compare(t *testing.T, name string, mk func() any, data []byte) {
	t.Helper()
	want, got := mk(), mk()
	e1, e2 := json.Unmarshal(data, want), jsonfast.Unmarshal(data, got)
	if (e1 == nil) != (e2 == nil) {
		t.Fatalf("%s from %q: encoding/json says %v, Unmarshal says %v", name, data, e1, e2)
	}
	if e1 == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%s from %q: encoding/json decodes %#v, Unmarshal %#v", name, data, want, got)
	}
}

// BenchmarkUnmarshal decodes the seeds' Task, Config (512 bytes of data)
// and AppendEntries through encoding/json and through this package.
//
//	go test -run '^$' -bench Unmarshal ./internal/jsonfast
func BenchmarkUnmarshal(b *testing.B) {
	docs := seeds(b)
	for i, name := range []string{"Task", "Config", "AppendEntries"} {
		for _, dec := range []struct {
			name      string
			unmarshal func([]byte, any) error
		}{{"encoding-json", json.Unmarshal}, {"jsonfast", jsonfast.Unmarshal}} {
			b.Run(name+"/"+dec.name, func(b *testing.B) {
				b.SetBytes(int64(len(docs[i])))
				for b.Loop() {
					if err := dec.unmarshal(docs[i], targets[name]()); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
