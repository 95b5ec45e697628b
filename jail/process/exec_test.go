package process_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/legionbsd/legion/jail"
)

// The process runtime has no terminal to offer, so a terminal, its size
// or its resizes are refused, never dropped.
func TestExecRefusesTerminalSettings(t *testing.T) {
	t.Parallel()
	r := newRuntime(t, t.TempDir())
	resizes := make(chan jail.TermSize)
	for _, c := range []struct {
		name      string
		spec      jail.ExecSpec
		want      string
		permanent bool
	}{
		{"tty", jail.ExecSpec{TTY: true}, "a terminal is not offered", false},
		{"size without tty", jail.ExecSpec{Size: &jail.TermSize{Rows: 24, Cols: 80}}, "size: a terminal size needs tty", true},
		{"resizes without tty", jail.ExecSpec{Resize: resizes}, "resize: terminal resizes need tty", true},
	} {
		c.spec.Command = []string{"/bin/true"}
		_, err := r.Exec(context.Background(), "c1", c.spec)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one saying %q", c.name, err, c.want)
			continue
		}
		if errors.Is(err, jail.ErrPermanent) != c.permanent {
			t.Errorf("%s: err %v: permanent %v, want %v", c.name, err, !c.permanent, c.permanent)
		}
	}
}
