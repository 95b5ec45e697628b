package sessions_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// execWith runs one exec session, sending the inputs after the start,
// and returns its output and exit code.
func execWith(t *testing.T, c legionpb.PodsClient, start *legionpb.ExecStart, inputs ...*legionpb.ExecInput) (string, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.Exec(ctx)
	if err != nil {
		return "", 0, err
	}
	for _, in := range append([]*legionpb.ExecInput{{Start: start}}, inputs...) {
		if err := st.Send(in); err != nil {
			return "", 0, err
		}
	}
	var out strings.Builder
	for {
		m, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return out.String(), 0, errors.New("ended without an exit code")
		}
		if err != nil {
			return out.String(), 0, err
		}
		out.Write(m.Stdout)
		if m.ExitCode != nil {
			st.CloseSend()
			return out.String(), int(*m.ExitCode), nil
		}
	}
}

// The terminal's size at the start, then each resize, reach the node's
// exec in order.
func TestExecPassesTheTerminalSizeAndResizes(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	out, code, err := execWith(t, dial(t, m, m.Admin),
		&legionpb.ExecStart{Target: &legionpb.Target{Namespace: "shop", Name: "web.1"}, Command: []string{"sizes", "2"}, Tty: true,
			Size: &legionpb.TermSize{Rows: 24, Cols: 80}},
		&legionpb.ExecInput{Resize: &legionpb.TermSize{Rows: 30, Cols: 100}},
		&legionpb.ExecInput{Resize: &legionpb.TermSize{Rows: 65535, Cols: 1}})
	if err != nil || code != 0 {
		t.Fatalf("exec: code %d %v, output %q", code, err, out)
	}
	if out != "24x80\n30x100\n65535x1\n" {
		t.Fatalf("the node's exec saw the sizes %q, want 24x80, then 30x100 and 65535x1", out)
	}
	if calls := a.Execs.Calls(); len(calls) != 1 || calls[0] != task.Metadata.UID+"-app: sizes 2 (tty 24x80)" {
		t.Fatalf("execs on the node %q", calls)
	}
}

// A size the terminal cannot take, or one for a command without a
// terminal, is refused, at the start or later.
func TestExecRefusesBadTerminalSizes(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	c := dial(t, m, m.Admin)
	tgt := &legionpb.Target{Namespace: "shop", Name: "web.1"}
	for _, tc := range []struct {
		name   string
		start  *legionpb.ExecStart
		inputs []*legionpb.ExecInput
		says   string
	}{
		{"a size without tty", &legionpb.ExecStart{Target: tgt, Command: []string{"cat"}, Size: &legionpb.TermSize{Rows: 24, Cols: 80}}, nil,
			"exec: size: a terminal size needs tty"},
		{"no rows", &legionpb.ExecStart{Target: tgt, Command: []string{"cat"}, Tty: true, Size: &legionpb.TermSize{Cols: 80}}, nil,
			"exec: size: 0x80: rows and cols are each 1 to 65535"},
		{"too many columns", &legionpb.ExecStart{Target: tgt, Command: []string{"cat"}, Tty: true, Size: &legionpb.TermSize{Rows: 24, Cols: 65536}}, nil,
			"exec: size: 24x65536: rows and cols are each 1 to 65535"},
		{"a resize without tty", &legionpb.ExecStart{Target: tgt, Command: []string{"wait"}},
			[]*legionpb.ExecInput{{Resize: &legionpb.TermSize{Rows: 24, Cols: 80}}}, "exec: resize: a terminal size needs tty"},
		{"a resize to nothing", &legionpb.ExecStart{Target: tgt, Command: []string{"wait"}, Tty: true},
			[]*legionpb.ExecInput{{Resize: &legionpb.TermSize{}}}, "exec: resize: 0x0: rows and cols are each 1 to 65535"},
	} {
		out, code, err := execWith(t, c, tc.start, tc.inputs...)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: code %d %v, output %q; want InvalidArgument saying %q", tc.name, code, err, out, tc.says)
		}
	}
	// The refused resizes ended their commands on the node.
	dispatchertest.Poll(t, "the commands ended", 10*time.Second, func() bool { return a.Execs.Running() == 0 })
}
