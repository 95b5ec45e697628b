package store

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
)

// testCommands are commands of every shape: objects with characters
// JSON escapes, preconditions, requirements, a delete without object.
func testCommands(t testing.TB) []command {
	odd := config("default", "a<b>&c\u2028", "<script>&\"é\x00{[}]\\")
	odd.Metadata.Labels = map[string]string{"z": "1", "a": "<&>", "object": `,"object":{`, "q": `"},"op":"delete"`}
	obj, err := legion.MarshalJSON(odd)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := legion.MarshalJSON(config("default", "a", "one"))
	return []command{
		{Op: opPut, Kind: legion.KindConfig, Namespace: "default", Name: "a", Object: plain},
		{Op: opPut, Kind: legion.KindNode, Name: "n1", Object: plain, KeepStatus: true},
		{Op: opPut, Kind: legion.KindConfig, Namespace: "default", Name: "a<b>&c\u2028", Object: obj, MustNotExist: true},
		{Op: opStatus, Kind: legion.KindConfig, Namespace: "default", Name: "a", Object: obj, Version: 12345},
		{Op: opPut, Kind: legion.KindConfig, Namespace: "default", Name: "a", Object: plain, Version: 7, KeepStatus: true,
			Requires: []Requirement{{Kind: legion.KindService, Namespace: "default", Name: "web", UID: "u"}, {Kind: legion.KindNode, Name: "n"}}},
		{Op: opDelete, Kind: legion.KindConfig, Namespace: "default", Name: "a", Version: 3},
	}
}

// A command's encoding is JSON that any decoder reads as json.Marshal's
// form of it (replicas running an older build decode it with
// json.Unmarshal, and raft's log holds entries of both forms), and
// decodeCommand reads both forms as the same command.
func TestCommandEncodingIsJSON(t *testing.T) {
	t.Parallel()
	for _, c := range testCommands(t) {
		marshalled, err := json.Marshal(&c)
		if err != nil {
			t.Fatal(err)
		}
		encoded, err := c.encode()
		if err != nil {
			t.Fatal(err)
		}
		if c.Object != nil && !bytes.HasPrefix(encoded, []byte(objectFirst)) {
			t.Errorf("encoded without its object first: %s", encoded)
		}
		var old command
		if err := json.Unmarshal(encoded, &old); err != nil {
			t.Fatalf("json.Unmarshal of %s: %v", encoded, err)
		}
		if d := cmp.Diff(c, old); d != "" {
			t.Errorf("json.Unmarshal read %s as (-want +got):\n%s", encoded, d)
		}
		for _, data := range [][]byte{encoded, marshalled} {
			var got command
			if err := decodeCommand(data, &got); err != nil {
				t.Fatalf("decodeCommand(%s): %v", data, err)
			}
			if d := cmp.Diff(c, got); d != "" {
				t.Errorf("decodeCommand read %s as (-want +got):\n%s", data, d)
			}
		}
		if n := objectEnd(encoded); c.Object != nil && (n == 0 || string(encoded[len(objectFirst):n]) != string(c.Object)) {
			t.Errorf("the object of %s not found where it ends (%d)", encoded, n)
		}
	}
}

// decodeCommand reads whatever json.Unmarshal reads as json.Unmarshal
// does, and what json.Unmarshal refuses it refuses or reads as a write
// whose object is not JSON (which the state machine refuses before it
// writes anything): a replica of this build and one of an older build
// make the same state of any log entry.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range testCommands(f) {
		enc, _ := c.encode()
		f.Add(enc)
		marshalled, _ := json.Marshal(&c)
		f.Add(marshalled)
	}
	f.Add([]byte(`{"object":{"a":"}"},"op":"put","kind":"Config","name":"x"}`))
	f.Add([]byte(`{"object":{"a":"\"}"},"op":"delete","kind":"Config","name":"x"}`))
	f.Add([]byte(`{"object":{],"op":"put","kind":"Config","name":"x","object":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got command
		wantErr := json.Unmarshal(data, &want)
		gotErr := decodeCommand(data, &got)
		switch {
		case wantErr == nil && gotErr != nil:
			t.Fatalf("json.Unmarshal reads %q, decodeCommand refuses it: %v", data, gotErr)
		case wantErr == nil:
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("%q read unlike json.Unmarshal (-want +got):\n%s", data, d)
			}
		case gotErr == nil:
			if (got.Op != opPut && got.Op != opStatus) || json.Valid(got.Object) {
				t.Fatalf("json.Unmarshal refuses %q (%v), decodeCommand reads it as %+v", data, wantErr, got)
			}
		}
	})
}

// objectEndByBytes is objectEnd as it was first written, a byte at a
// time: the reference the faster one must agree with.
func objectEndByBytes(data []byte) int {
	if !bytes.HasPrefix(data, []byte(objectFirst)) || len(data) <= len(objectFirst) || data[len(objectFirst)] != '{' {
		return 0
	}
	depth, inString := 0, false
	for i := len(objectFirst); i < len(data); i++ {
		b := data[i]
		switch {
		case inString && b == '\\':
			i++
		case b == '"':
			inString = !inString
		case inString:
		case b == '{' || b == '[':
			depth++
		case b == '}' || b == ']':
			depth--
			if depth == 0 {
				if i+1 < len(data) && data[i+1] == ',' {
					return i + 1
				}
				return 0
			}
		}
	}
	return 0
}

// objectEnd skips strings with IndexByte: on every command of
// testCommands, and on random runs of the characters that matter to it
// (quotes, backslashes, brackets, commas) after objectFirst, it finds
// the end the byte-by-byte scan finds, runs of backslashes and strings
// left open included.
func TestObjectEndFindsWhatAByteScanFinds(t *testing.T) {
	for _, c := range testCommands(t) {
		enc, err := c.encode()
		if err != nil {
			t.Fatal(err)
		}
		if got, want := objectEnd(enc), objectEndByBytes(enc); got != want {
			t.Errorf("objectEnd(%s) = %d, want %d", enc, got, want)
		}
	}
	alphabet := []byte(`"\{}[],ab`)
	rng := rand.New(rand.NewPCG(1, 2))
	found := 0
	for range 200000 {
		data := []byte(objectFirst + "{")
		for range rng.IntN(24) {
			data = append(data, alphabet[rng.IntN(len(alphabet))])
		}
		got, want := objectEnd(data), objectEndByBytes(data)
		if got != want {
			t.Fatalf("objectEnd(%q) = %d, want %d", data, got, want)
		}
		if want > 0 {
			found++
		}
	}
	if found < 1000 {
		t.Fatalf("only %d of the random commands had an object's end: the test needs more", found)
	}
}
