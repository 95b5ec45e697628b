package daemon

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/sys"
)

// emptyVM is a kernel with no processes to count.
type emptyVM struct{}

func (emptyVM) JailMaps(context.Context, string) ([]jail.ProcessMap, error) { return nil, nil }
func (emptyVM) SwapObjects(context.Context) ([]jail.VMObject, error)        { return nil, nil }
func (emptyVM) PageSize() int64                                             { return 4096 }

// racctIs answers kern.racct.enable with its value, as sysctl prints it
// on stdout, and everything else with the fake.
type racctIs struct {
	*sys.Fake
	value string
}

func (r racctIs) Run(ctx context.Context, c sys.Cmd) (sys.Result, error) {
	if c.String() == "sysctl -n kern.racct.enable" {
		return sys.Result{Stdout: []byte(r.value)}, nil
	}
	return r.Fake.Run(ctx, c)
}

// A jails node with rctl starts the memory killer over its runtime; one
// without rctl (kern.racct.enable 0, as the loader leaves it unless told)
// does not, and says so once, naming why.
func TestJailsNodeStartsTheMemoryKillerOnlyWithRctl(t *testing.T) {
	t.Parallel()
	const notStarted = "memory killer not started"
	for _, tc := range []struct {
		racct string
		want  bool
	}{{"1\n", true}, {"0\n", false}} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		dir := t.TempDir()
		f := freshHost()
		o := jailsOptions(t, dir, f)
		o.Runner = racctIs{f, tc.racct}
		o.kernelVM = emptyVM{}
		var logs bytes.Buffer
		p, err := openPlatform(ctx, o, "/usr/local/bin/legion", slog.New(slog.NewTextHandler(&logs, nil)))
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		if (p.oom != nil) != tc.want {
			t.Errorf("kern.racct.enable=%s: memory killer started %v, want %v", strings.TrimSpace(tc.racct), p.oom != nil, tc.want)
		}
		n := strings.Count(logs.String(), notStarted)
		switch {
		case tc.want && n != 0:
			t.Errorf("with rctl the log says %q: %s", notStarted, logs.String())
		case !tc.want && (n != 1 || !strings.Contains(logs.String(), "kern.racct.enable is not 1")):
			t.Errorf("without rctl the log must say once that the killer is off and why; it said it %d times:\n%s", n, logs.String())
		}
		if p.oom != nil {
			// It watches the runtime's containers: none yet, so a pass
			// kills nothing and runs no command.
			f.Reset()
			if killed := p.oom.Tick(ctx); len(killed) != 0 || len(f.Lines()) != 0 {
				t.Errorf("a pass over an empty node killed %v, ran %q", killed, f.Lines())
			}
		}
	}
}
