package jail

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
)

// The memory killer as the daemon composes it: the runtime's limited
// containers, ps -J (FreeBSD's answer on stdout, right-aligned pids) and
// kern.proc.vmmap read through KernelVM, the count, and kill. The
// container over its limit loses its process with the most memory of its
// own; the one under its limit and the one without a limit are left be.
func TestOOMKillerThroughTheRuntime(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const page = 4096
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	if err := e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true}); err != nil {
		t.Fatal(err)
	}
	members := []ContainerSpec{
		{ID: "web", Resources: Resources{MemoryBytes: 40 * page}}, // uses 50 pages
		{ID: "side", Resources: Resources{MemoryBytes: 1 << 30}},  // uses 5
		{ID: "free"}, // no limit: not watched
	}
	for i, m := range members {
		m.Pod, m.Command, m.Root = "pod1", []string{"/bin/sleep", "1000"}, Root{Path: t.TempDir()}
		e.fake.On("jls --libxo=json -j pod1."+m.ID+" ", jlsAnswer("pod1."+m.ID, ContainerParams(m.Security, true)))
		if err := e.j.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		if err := e.j.Start(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(e.data, "jails", m.ID, RunFile)
		var run RunInfo
		if err := ReadJSON(path, &run); err != nil {
			t.Fatal(err)
		}
		run.ShimPid, run.Pid = 4000+i, 4100+i
		if err := WriteJSON(path, run); err != nil {
			t.Fatal(err)
		}
	}
	e.fake.Reset()
	e.fake.On("ps -ax -o pid= -J pod1.web", sys.Answer{Stdout: "  101\n  102\n  103\n"})
	e.fake.On("ps -ax -o pid= -J pod1.side", sys.Answer{Stdout: "  201\n"})
	e.fake.On("kill -s KILL 102", sys.Answer{})

	anon := func(start, obj uint64, pages int32) []byte {
		return vmentry(kvmeTypeDefault, start, start+uint64(pages)*page, 0, 0, pages, obj, "")
	}
	maps := map[int][]byte{
		// 101 and 102 share 10 pages (a fork's object); 101 has 10 of its
		// own, 102 30: 50 pages counted once each, against a limit of 40.
		101: slices.Concat(anon(0x10000, 0xa1, 10), anon(0x80000, 0x5a, 10)),
		102: slices.Concat(anon(0x10000, 0xa2, 30), anon(0x80000, 0x5a, 10)),
		201: anon(0x10000, 0xb1, 5),
	}
	vm := KernelVM{Runner: e.fake, Pages: page, Sysctl: func(name string, args ...int) ([]byte, error) {
		switch {
		case name == "vm.swap_objects":
			return nil, nil
		case name == "kern.proc.vmmap" && len(args) == 1:
			if b, ok := maps[args[0]]; ok {
				return b, nil
			}
			return nil, syscall.ESRCH // 103 exited between ps and the read
		}
		return nil, fmt.Errorf("unexpected sysctl %s %v", name, args)
	}}

	killed := e.j.OOMKiller(vm).Tick(ctx)
	if d := cmp.Diff([]int{102}, killed); d != "" {
		t.Fatalf("killed (-want +got):\n%s", d)
	}
	// The containers come in the runtime's list order: compare as sets.
	want := []string{"kill -s KILL 102", "ps -ax -o pid= -J pod1.side", "ps -ax -o pid= -J pod1.web"}
	got := e.fake.Lines()
	slices.Sort(got)
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("commands (-want +got):\n%s", d)
	}
}
