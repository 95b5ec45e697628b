//go:build linux || freebsd

package jail

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The size set on the pair's master side is the terminal's, as the
// command on the other side reads it.
func TestSetWinsizeOnARealPTY(t *testing.T) {
	t.Parallel()
	master, slave, err := openPTY()
	if err != nil {
		t.Fatalf("openPTY: %v", err)
	}
	t.Cleanup(func() { master.Close(); slave.Close() })
	for _, want := range []TermSize{{Rows: 33, Cols: 101}, {Rows: 7, Cols: 65535}} {
		if err := setWinsize(master, want); err != nil {
			t.Fatal(err)
		}
		ws, err := unix.IoctlGetWinsize(int(slave.Fd()), unix.TIOCGWINSZ)
		if err != nil {
			t.Fatal(err)
		}
		if got := (TermSize{Rows: ws.Row, Cols: ws.Col}); got != want {
			t.Fatalf("after setting %v the terminal says %v", want, got)
		}
	}
}

func TestParseTermSize(t *testing.T) {
	t.Parallel()
	for _, s := range []TermSize{{Rows: 24, Cols: 80}, {Rows: 0, Cols: 0}, {Rows: 65535, Cols: 1}} {
		got, err := parseTermSize(s.String())
		if err != nil || got != s {
			t.Errorf("parseTermSize(%q) = %v, %v; want %v", s.String(), got, err, s)
		}
	}
	for _, bad := range []string{"", "24", "24x", "x80", "24x80x1", "65536x80", "-1x80", "24 80"} {
		if got, err := parseTermSize(bad); err == nil {
			t.Errorf("parseTermSize(%q) = %v, want an error", bad, got)
		}
	}
}
