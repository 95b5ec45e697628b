package jail_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/logtest"
	"github.com/legionbsd/legion/jail"
)

// syncBuffer is output written by the runtime's goroutines while the
// test reads it.
type syncBuffer = logtest.Buffer

// Exec on a terminal: the command starts at the size asked for, and a
// resize reaches it as SIGWINCH with the new size.
func TestExecTerminalSizeAndResize(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/ptmx"); err != nil {
		t.Skip("no /dev/ptmx here")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	j := newHostJails(t, exe, jail.ExecSpawner{})
	t.Cleanup(func() { j.Remove(context.Background(), "c1") })
	spec := jail.ContainerSpec{ID: "c1", Command: []string{"/bin/sh", "-c", "sleep 600 & wait"}, Root: jail.Root{Path: "/"}}
	if err := j.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := j.Start(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	resizes := make(chan jail.TermSize)
	type result struct {
		code int
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, err := j.Exec(ctx, "c1", jail.ExecSpec{TTY: true,
			Size: &jail.TermSize{Rows: 31, Cols: 97}, Resize: resizes,
			Command: []string{"/bin/sh", "-c", `trap 'echo now $(stty size); exit 5' WINCH; echo at $(stty size); while :; do sleep 0.05; done`},
			Stdout:  &out, Stderr: &out})
		done <- result{code, err}
	}()
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(out.String(), "at ") {
		if time.Now().After(deadline) {
			t.Fatalf("the command never said its size; output %q", out.String())
		}
		time.Sleep(10 * time.Millisecond) // polling the output
	}
	select {
	case resizes <- jail.TermSize{Rows: 42, Cols: 133}:
	case r := <-done:
		t.Fatalf("exec ended before the resize: %d %v, output %q", r.code, r.err, out.String())
	}
	r := <-done
	if r.err != nil || r.code != 5 {
		t.Fatalf("exec: code %d %v, output %q; want 5 after the resize", r.code, r.err, out.String())
	}
	if got := out.String(); !strings.Contains(got, "at 31 97") || !strings.Contains(got, "now 42 133") {
		t.Fatalf("output %q: want the size 31 97 at the start and 42 133 after the resize", got)
	}
}
