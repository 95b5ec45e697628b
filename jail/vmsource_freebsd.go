//go:build freebsd

package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/sys"
	"golang.org/x/sys/unix"
)

// KernelVM is the VMSource of a FreeBSD host: the jail's processes from
// ps -J, each one's map from kern.proc.vmmap, and vm.swap_objects.
type KernelVM struct{ Runner sys.Runner }

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
		b, err := unix.SysctlRaw("kern.proc.vmmap", pid)
		if errors.Is(err, unix.ESRCH) {
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
func (KernelVM) SwapObjects(ctx context.Context) ([]VMObject, error) {
	b, err := unix.SysctlRaw("vm.swap_objects")
	if err != nil {
		return nil, fmt.Errorf("vm.swap_objects: %w", err)
	}
	return DecodeVMObjects(b)
}

// PageSize implements VMSource.
func (KernelVM) PageSize() int64 { return int64(os.Getpagesize()) }
