package sessionsclient

import (
	"context"
	"strings"
	"sync"
	"testing"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/jail"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// attachStream records what the agent sends on its Attach stream.
type attachStream struct {
	grpc.ClientStream
	mu   sync.Mutex
	sent []*legionpb.AttachOutput
}

func (s *attachStream) Send(m *legionpb.AttachOutput) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, m)
	return nil
}

func (s *attachStream) Recv() (*legionpb.AttachInput, error) { panic("not used by exec") }

// last is the session's end: an error or the exit code.
func (s *attachStream) last() *legionpb.AttachOutput {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sent) == 0 {
		return nil
	}
	return s.sent[len(s.sent)-1]
}

// The agent hands the offer's size and the relayed resizes to the
// runtime, and refuses what a terminal cannot take even when a manager
// relays it.
func TestExecTerminalSizes(t *testing.T) {
	t.Parallel()
	var got []string
	run := func(ctx context.Context, id string, spec jail.ExecSpec) (int, error) {
		if spec.Size != nil {
			got = append(got, "size "+spec.Size.String())
		}
		for {
			select {
			case s, ok := <-spec.Resize:
				if !ok {
					return 0, nil
				}
				got = append(got, "resize "+s.String())
			case <-ctx.Done():
				return -1, ctx.Err()
			}
		}
	}
	c := &Client{cfg: Config{Exec: run}}
	o := &legionpb.SessionOffer{Namespace: "ns", Task: "t", TaskUid: "u1", Container: "app"}
	for _, tc := range []struct {
		name   string
		offer  *legionpb.ExecOffer
		inputs []*legionpb.AttachInput
		want   string // the session's error, "" for exit code 0
		runs   []string
	}{
		{"a size and resizes", &legionpb.ExecOffer{Command: []string{"sh"}, Tty: true, Size: &legionpb.TermSize{Rows: 24, Cols: 80}},
			[]*legionpb.AttachInput{{Resize: &legionpb.TermSize{Rows: 30, Cols: 100}}, {Stdin: []byte("ignored without stdin")}, {Resize: &legionpb.TermSize{Rows: 1, Cols: 65535}}},
			"", []string{"size 24x80", "resize 30x100", "resize 1x65535"}},
		{"a size without tty", &legionpb.ExecOffer{Command: []string{"sh"}, Size: &legionpb.TermSize{Rows: 24, Cols: 80}}, nil,
			"exec: size: a terminal size needs tty", nil},
		{"a size out of range", &legionpb.ExecOffer{Command: []string{"sh"}, Tty: true, Size: &legionpb.TermSize{Rows: 70000, Cols: 80}}, nil,
			"exec: size: 70000x80: rows and cols are each 1 to 65535", nil},
		{"a resize without tty", &legionpb.ExecOffer{Command: []string{"sh"}, Stdin: true},
			[]*legionpb.AttachInput{{Resize: &legionpb.TermSize{Rows: 24, Cols: 80}}}, "exec: resize: terminal resizes need tty", nil},
		{"a resize to nothing", &legionpb.ExecOffer{Command: []string{"sh"}, Tty: true},
			[]*legionpb.AttachInput{{Resize: &legionpb.TermSize{Rows: 24}}}, "exec: resize: 24x0: rows and cols are each 1 to 65535", nil},
	} {
		got = nil
		st := &attachStream{}
		inputs := make(chan *legionpb.AttachInput, len(tc.inputs))
		for _, in := range tc.inputs {
			inputs <- in
		}
		close(inputs)
		if err := c.exec(context.Background(), st, o, tc.offer, inputs); err != nil {
			t.Fatalf("%s: exec: %v", tc.name, err)
		}
		last := st.last()
		switch {
		case tc.want == "" && (last == nil || last.ExitCode == nil || *last.ExitCode != 0):
			t.Errorf("%s: the session ended with %v, want exit code 0", tc.name, last)
		case tc.want != "" && (last == nil || last.Error == nil || codes.Code(last.Error.Code) != codes.InvalidArgument || !strings.Contains(last.Error.Message, tc.want)):
			t.Errorf("%s: the session ended with %v, want InvalidArgument saying %q", tc.name, last, tc.want)
		}
		if strings.Join(got, ", ") != strings.Join(tc.runs, ", ") {
			t.Errorf("%s: the runtime got %q, want %q", tc.name, got, tc.runs)
		}
	}
}
