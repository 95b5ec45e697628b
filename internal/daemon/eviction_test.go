package daemon

import (
	"runtime"
	"testing"

	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/sys"
)

// The agent measures a jails node's available memory with sysctl through
// the node's runner, and a process node's as its host tells it.
func TestNodeMemoryByPlatform(t *testing.T) {
	t.Parallel()
	f := sys.NewFake()
	if m, ok := nodeMemory(Options{Platform: PlatformJails, Runner: f}).(agent.SysctlMemory); !ok || m.Runner != f {
		t.Errorf("jails: %#v, want sysctl through the node's runner", m)
	}
	got := nodeMemory(Options{Platform: PlatformProcess})
	switch runtime.GOOS {
	case "linux":
		if _, ok := got.(agent.MemInfo); !ok {
			t.Errorf("process on Linux: %#v, want /proc/meminfo", got)
		}
	case "freebsd":
		if _, ok := got.(agent.SysctlMemory); !ok {
			t.Errorf("process on FreeBSD: %#v, want sysctl", got)
		}
	default:
		if got != nil {
			t.Errorf("process on %s: %#v, want none", runtime.GOOS, got)
		}
	}
}

// The node reports the memory pressure its agent last said, in the
// status it registers (and registers again when it changes).
func TestNodeStatusSaysMemoryPressure(t *testing.T) {
	t.Parallel()
	p := &platform{}
	if nodeStatus("h", p, Options{}).MemoryPressure {
		t.Fatal("memory pressure reported before the agent said any")
	}
	p.memoryPressure.Store(true)
	if !nodeStatus("h", p, Options{}).MemoryPressure {
		t.Fatal("memory pressure the agent said is not reported")
	}
}
