package sessionsclient

import (
	"bytes"
	"errors"
	"io"
	"testing"

	legionpb "github.com/legionbsd/legion/internal/proto"
)

// The relayed stream reads to a clean end only once the manager closed
// it; the session ending first is an error, so a cut stream is never
// taken for a whole one.
func TestInputReaderEndsCleanlyOnlyWhenClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		inputs []*legionpb.AttachInput
		want   error
	}{
		{"closed", []*legionpb.AttachInput{{Data: []byte("ab")}, {Data: []byte("cd"), Closed: true}}, nil},
		{"closed on its own", []*legionpb.AttachInput{{Data: []byte("abcd")}, {Closed: true}}, nil},
		{"cut", []*legionpb.AttachInput{{Data: []byte("ab")}, {Data: []byte("cd")}}, errStreamCut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ch := make(chan *legionpb.AttachInput, len(tc.inputs))
			for _, in := range tc.inputs {
				ch <- in
			}
			close(ch) // the session's end
			got, err := io.ReadAll(&inputReader{inputs: ch})
			if string(got) != "abcd" || !errors.Is(err, tc.want) {
				t.Fatalf("read %q, %v; want abcd, %v", got, err, tc.want)
			}
		})
	}
}

// Writes of any size go out as messages of at most VolumeChunk bytes, in
// order, each in a buffer of its own.
func TestChunkerCutsWritesIntoChunks(t *testing.T) {
	t.Parallel()
	data := make([]byte, 3*VolumeChunk+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	var sent [][]byte
	c := &chunker{send: func(p []byte) error { sent = append(sent, p); return nil }}
	for _, n := range []int{10, VolumeChunk * 2, 1, len(data) - 2*VolumeChunk - 11} {
		if _, err := c.Write(data[:n]); err != nil {
			t.Fatal(err)
		}
		data = data[n:]
	}
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for i, p := range sent {
		if len(p) > VolumeChunk {
			t.Errorf("message %d: %d bytes, at most %d allowed", i, len(p), VolumeChunk)
		}
		if i > 0 && len(p) > 0 && len(sent[i-1]) > 0 && &p[0] == &sent[i-1][0] {
			t.Errorf("message %d shares its buffer with the one before", i)
		}
		got = append(got, p...)
	}
	want := make([]byte, 3*VolumeChunk+100)
	for i := range want {
		want[i] = byte(i * 7)
	}
	if !bytes.Equal(got, want) || len(sent) != 4 {
		t.Errorf("sent %d bytes in %d messages, want %d in 4", len(got), len(sent), len(want))
	}
}
