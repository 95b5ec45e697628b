package client_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/sessions/sessionstest"
)

// Exec on a terminal hands the node's exec the terminal's size, then the
// sizes sent on Resize, in order; a size without a terminal is refused.
func TestExecTerminalSize(t *testing.T) {
	t.Parallel()
	m := sessionstest.Start(t)
	a := m.StartAgent(t, "n1")
	task := m.Put(t, "shop", "web.1", "n1", legion.TaskRunning, legion.Owner{}, "app")
	c := adminOf(t, m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	target := client.Target{Namespace: "shop", Name: "web.1"}

	resize := make(chan client.TermSize)
	go func() {
		for _, s := range []client.TermSize{{Rows: 30, Cols: 100}, {Rows: 40, Cols: 120}} {
			select {
			case resize <- s:
			case <-ctx.Done():
				return
			}
		}
	}()
	var out strings.Builder
	code, err := c.Exec(ctx, target, client.ExecOptions{Command: []string{"sizes", "2"}, TTY: true,
		Size: &client.TermSize{Rows: 24, Cols: 80}, Resize: resize, Stdout: &out})
	if err != nil || code != 0 {
		t.Fatalf("exec: code %d %v, output %q", code, err, out.String())
	}
	if out.String() != "24x80\n30x100\n40x120\n" {
		t.Fatalf("the node's exec saw the sizes %q, want 24x80, then 30x100 and 40x120", out.String())
	}
	if calls := a.Execs.Calls(); len(calls) != 1 || calls[0] != task.Metadata.UID+"-app: sizes 2 (tty 24x80)" {
		t.Fatalf("execs on the node %q", calls)
	}

	for _, tc := range []struct {
		name string
		o    client.ExecOptions
		says string
	}{
		{"a size without TTY", client.ExecOptions{Size: &client.TermSize{Rows: 24, Cols: 80}}, "exec: Size: a terminal size needs TTY"},
		{"resizes without TTY", client.ExecOptions{Resize: make(chan client.TermSize)}, "exec: Resize: terminal resizes need TTY"},
		{"no columns", client.ExecOptions{TTY: true, Size: &client.TermSize{Rows: 24}}, "exec: Size: 24x0: rows and cols must each be at least 1"},
	} {
		tc.o.Command = []string{"cat"}
		if _, err := c.Exec(ctx, target, tc.o); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.says)
		}
	}
	if calls := a.Execs.Calls(); len(calls) != 1 {
		t.Errorf("refused execs reached the node: %q", calls)
	}
}
