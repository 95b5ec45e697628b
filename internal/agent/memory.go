package agent

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// SysctlMemory measures a FreeBSD host's available memory with sysctl(8):
// its free and inactive pages (vm.stats.vm.v_free_count and
// vm.stats.vm.v_inactive_count, counts of hw.pagesize pages), which the
// page daemon hands out or reclaims first, plus the ZFS ARC above its
// minimum (kstat.zfs.misc.arcstats.size less c_min, in bytes), which the
// ARC gives back when free memory runs low. Laundry pages are left out:
// they are dirty and must go to swap before they can be reused, as
// Linux's MemAvailable leaves out anonymous memory.
type SysctlMemory struct{ Runner sys.Runner }

// AvailableMemory implements MemoryReader.
func (m SysctlMemory) AvailableMemory(ctx context.Context) (int64, error) {
	vm, err := sysctlNumbers(ctx, m.Runner, "hw.pagesize", "vm.stats.vm.v_free_count", "vm.stats.vm.v_inactive_count")
	if err != nil {
		return 0, err
	}
	avail := (vm[1] + vm[2]) * vm[0]
	arc, err := sysctlNumbers(ctx, m.Runner, "kstat.zfs.misc.arcstats.size", "kstat.zfs.misc.arcstats.c_min")
	switch {
	case sys.IsExit(err, "unknown oid"):
		// ZFS is not loaded: no ARC to give memory back.
	case err != nil:
		return 0, err
	case arc[0] > arc[1]:
		avail += arc[0] - arc[1]
	}
	return avail, nil
}

// sysctlNumbers reads numeric OIDs with `sysctl -n`, which prints each
// value alone on a line of its own, in the order asked.
func sysctlNumbers(ctx context.Context, r sys.Runner, names ...string) ([]int64, error) {
	res, err := sys.Run(ctx, r, "sysctl", append([]string{"-n"}, names...)...)
	if err != nil {
		return nil, err
	}
	lines := strings.Fields(string(res.Stdout))
	if len(lines) != len(names) {
		return nil, fmt.Errorf("sysctl -n %s printed %q: expected %d numbers", strings.Join(names, " "), res.Stdout, len(names))
	}
	out := make([]int64, len(names))
	for i, l := range lines {
		n, err := strconv.ParseInt(l, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("sysctl %s printed %q: expected a count", names[i], l)
		}
		out[i] = n
	}
	return out, nil
}

// MemInfo measures a Linux host's available memory as the kernel
// estimates it: MemAvailable in /proc/meminfo (free memory plus the page
// cache and slab it can reclaim), which kubelet's memory.available
// approximates too.
type MemInfo struct {
	// Path is the file read; /proc/meminfo when empty.
	Path string
}

// AvailableMemory implements MemoryReader.
func (m MemInfo) AvailableMemory(ctx context.Context) (int64, error) {
	p := m.Path
	if p == "" {
		p = "/proc/meminfo"
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		// "MemAvailable:   12345678 kB": kB is KiB there.
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s: MemAvailable %q: expected a number of kB", p, strings.TrimSpace(rest))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 {
			return 0, fmt.Errorf("%s: MemAvailable %q: expected a number of kB", p, strings.TrimSpace(rest))
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("%s: no MemAvailable line (Linux 3.14 and later have it)", p)
}
