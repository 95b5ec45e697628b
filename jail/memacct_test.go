package jail

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
)

type memoryFixture struct {
	About      string       `json:"about"`
	PageSize   int64        `json:"pageSize"`
	Limit      int64        `json:"limit"`
	Objects    []VMObject   `json:"objects"`
	Procs      []ProcessMap `json:"procs"`
	Want       MemoryCount  `json:"want"`
	WantVictim int          `json:"wantVictim"`
}

func loadMemoryFixtures(t *testing.T) map[string]memoryFixture {
	t.Helper()
	paths, err := filepath.Glob("testdata/memory/*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("fixtures: %v %v", paths, err)
	}
	out := map[string]memoryFixture{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f memoryFixture
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".json")] = f
	}
	return out
}

func TestCountMemoryFixtures(t *testing.T) {
	t.Parallel()
	for name, f := range loadMemoryFixtures(t) {
		t.Run(name, func(t *testing.T) {
			got := CountMemory(f.Procs, f.Objects, f.PageSize)
			if d := cmp.Diff(f.Want, got); d != "" {
				t.Fatalf("%s\ncount (-want +got):\n%s", f.About, d)
			}
			pid, over := OOMVictim(f.Limit, got)
			if pid != f.WantVictim || over != (f.WantVictim != 0) {
				t.Fatalf("victim %d (over %v), want %d", pid, over, f.WantVictim)
			}
		})
	}
}

// The rctl view of the postgres fixture counts each process's resident
// pages, shared or not: the reason for the count above.
func TestRctlWouldCountSharedPagesPerProcess(t *testing.T) {
	t.Parallel()
	f := loadMemoryFixtures(t)["postgres"]
	var sum uint64
	for _, p := range f.Procs {
		for _, m := range p.Maps {
			sum += m.Resident
		}
	}
	perProcess := int64(sum) * f.PageSize
	if perProcess < 5*128<<20 || perProcess <= 4*f.Want.Bytes {
		t.Fatalf("per-process sum %d: expected the shared buffers counted five times", perProcess)
	}
}

type fixtureSource struct{ f memoryFixture }

func (s fixtureSource) JailMaps(ctx context.Context, jail string) ([]ProcessMap, error) {
	if jail != "pod1.db" {
		return nil, errors.New("no such jail")
	}
	return s.f.Procs, nil
}
func (s fixtureSource) SwapObjects(ctx context.Context) ([]VMObject, error) { return s.f.Objects, nil }
func (s fixtureSource) PageSize() int64                                     { return s.f.PageSize }

func TestOOMKillerLoop(t *testing.T) {
	t.Parallel()
	f := loadMemoryFixtures(t)["postgres"]
	counter := VMCounter{Source: fixtureSource{f}}
	fake := sys.NewFake().On("kill -s KILL 999", sys.Answer{Code: 1, Stderr: "kill: 999: No such process"})
	o := &OOMKiller{
		Containers: func(context.Context) []Limited {
			return []Limited{{Jail: "pod1.db", Limit: f.Limit}, {Jail: "pod1.gone", Limit: 1}, {Jail: "pod1.db", Limit: 1 << 30}}
		},
		Count:  counter.Count,
		Runner: fake,
	}
	killed := o.Tick(context.Background())
	if d := cmp.Diff([]int{104}, killed); d != "" {
		t.Fatalf("killed (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"kill -s KILL 104"}, fake.Lines()); d != "" {
		t.Fatalf("lines (-want +got):\n%s", d)
	}
	if n, err := counter.JailMemory(context.Background(), "pod1.db"); err != nil || n != f.Want.Bytes {
		t.Fatalf("JailMemory %d %v", n, err)
	}

	// The loop ticks once per interval of its clock until its context ends.
	clock := &fakeClock{}
	ctx, cancel := context.WithCancel(context.Background())
	ticks := 0
	o.Containers = func(context.Context) []Limited {
		ticks++
		if ticks == 3 {
			cancel()
		}
		return nil
	}
	o.Clock = clock
	o.Run(ctx)
	// The select after the cancel asks the clock for one more wait.
	if ticks != 3 || clock.waited.Seconds() < 3 || clock.waited.Seconds() > 4 {
		t.Fatalf("ticks %d after %v, want 3 one second apart", ticks, clock.waited)
	}
}
