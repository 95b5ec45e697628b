package process_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/legionbsd/legion/jail/process"
)

func TestNewSaysItIsolatesNothing(t *testing.T) {
	var buf bytes.Buffer
	_, err := process.New(process.Config{DataDir: t.TempDir(), Shim: "/bin/false",
		Log: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); !strings.Contains(got, "level=WARN") || !strings.Contains(got, "nothing is isolated") {
		t.Fatalf("log at construction %q: want a warning that nothing is isolated", got)
	}
	for _, cfg := range []process.Config{{Shim: "/bin/false"}, {DataDir: t.TempDir()}} {
		if _, err := process.New(cfg); err == nil {
			t.Errorf("New(%+v): want an error naming what is missing", cfg)
		}
	}
}
