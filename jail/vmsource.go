package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/legionbsd/legion/sys"
)

// Sysctl reads a sysctl's raw bytes, by name and the numbers after it
// (kern.proc.vmmap, pid).
type Sysctl func(name string, args ...int) ([]byte, error)

// KernelVM is the VMSource of a FreeBSD host: the jail's processes from
// ps -J, each one's map from kern.proc.vmmap, and vm.swap_objects. The
// command and the sysctl reads are both seams, so the whole path runs on
// recorded answers too.
type KernelVM struct {
	Runner sys.Runner
	Sysctl Sysctl // HostSysctl on FreeBSD
	Pages  int64  // page size; the host's when zero
}

// HostVM is the host's VMSource, or false where the kernel has none to
// read (any host but FreeBSD).
func HostVM(r sys.Runner) (KernelVM, bool) {
	if hostSysctl == nil {
		return KernelVM{}, false
	}
	return KernelVM{Runner: r, Sysctl: hostSysctl}, true
}

// JailMaps implements VMSource.
func (k KernelVM) JailMaps(ctx context.Context, jailName string) ([]ProcessMap, error) {
	res, err := sys.Run(ctx, k.Runner, "ps", "-ax", "-o", "pid=", "-J", jailName)
	var ee *sys.ExitError
	if errors.As(err, &ee) && len(strings.TrimSpace(string(res.Stdout))) == 0 {
		return nil, nil // no processes in the jail
	}
	if err != nil {
		return nil, err
	}
	var out []ProcessMap
	for _, f := range strings.Fields(string(res.Stdout)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("ps -J %s: pid %q: expected a number", jailName, f)
		}
		b, err := k.Sysctl("kern.proc.vmmap", pid)
		if errors.Is(err, syscall.ESRCH) {
			continue // gone meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("kern.proc.vmmap.%d: %w", pid, err)
		}
		maps, err := DecodeVMMap(b, k.PageSize())
		if err != nil {
			return nil, err
		}
		out = append(out, ProcessMap{Pid: pid, Maps: maps})
	}
	return out, nil
}

// SwapObjects implements VMSource.
func (k KernelVM) SwapObjects(ctx context.Context) ([]VMObject, error) {
	b, err := k.Sysctl("vm.swap_objects")
	if err != nil {
		return nil, fmt.Errorf("vm.swap_objects: %w", err)
	}
	return DecodeVMObjects(b)
}

// PageSize implements VMSource.
func (k KernelVM) PageSize() int64 {
	if k.Pages > 0 {
		return k.Pages
	}
	return int64(os.Getpagesize())
}
