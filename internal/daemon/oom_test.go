package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/sys"
)

const testPage = 4096

// mapsVM is a kernel's memory maps by jail (jail.KernelVM reads them from
// ps -J and kern.proc.vmmap; jail's own tests cover that part).
type mapsVM map[string][]jail.ProcessMap

func (m mapsVM) JailMaps(_ context.Context, name string) ([]jail.ProcessMap, error) {
	return m[name], nil
}
func (mapsVM) SwapObjects(context.Context) ([]jail.VMObject, error) { return nil, nil }
func (mapsVM) PageSize() int64                                      { return testPage }

// anonMap is a process's map of anonymous objects, object -> resident pages.
func anonMap(pid int, objects map[uint64]uint64) jail.ProcessMap {
	pm := jail.ProcessMap{Pid: pid}
	start := uint64(0x10000)
	for obj, pages := range objects {
		pm.Maps = append(pm.Maps, jail.Mapping{Start: start, End: start + pages*testPage, Kind: jail.MapAnon, Object: obj, Resident: pages})
		start += 0x1000000
	}
	return pm
}

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
		// web's 101 and 102 share 10 pages (a fork's object); 101 has 10
		// of its own, 102 30; side's 201 has 5.
		o.kernelVM = mapsVM{
			"pod1.web":  {anonMap(101, map[uint64]uint64{0xa1: 10, 0x5a: 10}), anonMap(102, map[uint64]uint64{0xa2: 30, 0x5a: 10})},
			"pod1.side": {anonMap(201, map[uint64]uint64{0xb1: 5})},
		}
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
			killsLargestOverLimit(ctx, t, p, o, f)
		}
	}
}

// jlsOf is jls --libxo=json's answer for a jail holding params.
func jlsOf(name string, params []jail.Param) sys.Answer {
	j := map[string]string{"name": name}
	for _, p := range params {
		v := p.Value
		if strings.HasPrefix(p.Name, "allow.") {
			v = map[string]string{"0": "false", "1": "true"}[v]
		}
		j[p.Name] = v
	}
	b, _ := json.Marshal(map[string]any{"__version": "2", "jail-information": map[string]any{"jail": []any{j}}})
	return sys.Answer{Stdout: string(b) + "\n"}
}

// killsLargestOverLimit runs a pod of two limited containers on the
// node's runtime and one pass of the node's memory killer: web, 50 pages
// against a limit of 40, loses its process with the most pages of its
// own; side, under its limit, keeps its.
func killsLargestOverLimit(ctx context.Context, t *testing.T, p *platform, o Options, f *sys.Fake) {
	t.Helper()
	rt := p.runtime
	f.On("sysctl -n kern.boottime", sys.Answer{Stdout: "{ sec = 1764000000, usec = 42 } Mon Nov 24 16:00:00 2025\n"})
	f.On("jls --libxo=json -j pod1 ", jlsOf("pod1", append([]jail.Param{{Name: "vnet", Value: "new"}}, jail.InfraParams(nil)...)))
	if err := rt.Create(ctx, jail.ContainerSpec{ID: "pod1", Infra: true}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []jail.ContainerSpec{{ID: "web", Resources: jail.Resources{MemoryBytes: 40 * testPage}},
		{ID: "side", Resources: jail.Resources{MemoryBytes: 1 << 30}}} {
		m.Pod, m.Command, m.Root = "pod1", []string{"/bin/sleep", "1000"}, jail.Root{Path: t.TempDir()}
		f.On("jls --libxo=json -j pod1."+m.ID+" ", jlsOf("pod1."+m.ID, jail.ContainerParams(m.Security, true)))
		if err := rt.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
		// What the supervisor records once it runs; this test process
		// stands in for it, as a supervisor that is alive.
		path := filepath.Join(o.DataDir, "jails", m.ID, jail.RunFile)
		var run jail.RunInfo
		if err := jail.ReadJSON(path, &run); err != nil {
			t.Fatal(err)
		}
		run.ShimPid, run.Pid = os.Getpid(), 100
		if err := jail.WriteJSON(path, run); err != nil {
			t.Fatal(err)
		}
	}
	f.Reset()
	if killed := p.oom.Tick(ctx); len(killed) != 1 || killed[0] != 102 {
		t.Errorf("killed %v, want web's largest process 102 alone", killed)
	}
	var kills []string
	for _, l := range f.Lines() {
		if strings.HasPrefix(l, "kill") {
			kills = append(kills, l)
		}
	}
	if len(kills) != 1 || kills[0] != "kill -s KILL 102" {
		t.Errorf("kill commands %q, want kill -s KILL 102 alone", kills)
	}
}
