package jail

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// NodeModules are the kernel modules a node needs: after a reboot the
// bridge and epair drivers are not loaded and a jail cannot load them on
// demand (SIOCIFCREATE2: Invalid argument).
var NodeModules = []string{"if_bridge", "if_epair", "pf"}

// LinuxModules are what the Linux ABI and its jails' file systems need.
var LinuxModules = []string{"linux64", "linprocfs", "linsysfs", "fdescfs", "tmpfs"}

// LoadModules loads each module unless it is loaded already (kldload -n).
func LoadModules(ctx context.Context, r sys.Runner, modules []string) error {
	for _, m := range modules {
		if _, err := sys.Run(ctx, r, "kldload", "-n", m); err != nil {
			return fmt.Errorf("load kernel module %s (kldload -n %s): %w", m, m, err)
		}
	}
	return nil
}

// FallbackBrandLinux is kern.elf64.fallback_brand's value for Linux.
const FallbackBrandLinux = "3"

// EnableLinux prepares the host for Linux images (6.6): loads the modules
// and, where the host left kern.elf64.fallback_brand unset (-1), sets it to
// Linux so static Linux programs run. A host that chose another value keeps
// it; the returned warnings say static Linux programs won't run there.
func EnableLinux(ctx context.Context, r sys.Runner) (warnings []string, err error) {
	if err := LoadModules(ctx, r, LinuxModules); err != nil {
		return nil, fmt.Errorf("enable Linux: %w", err)
	}
	res, err := sys.Run(ctx, r, "sysctl", "-n", "kern.elf64.fallback_brand")
	if err != nil {
		return nil, fmt.Errorf("enable Linux: %w", err)
	}
	switch v := strings.TrimSpace(string(res.Stdout)); v {
	case "-1":
		if _, err := sys.Run(ctx, r, "sysctl", "kern.elf64.fallback_brand="+FallbackBrandLinux); err != nil {
			return nil, fmt.Errorf("enable Linux: %w", err)
		}
	case FallbackBrandLinux:
	default:
		warnings = append(warnings, fmt.Sprintf("kern.elf64.fallback_brand is %s, not %s (Linux): static Linux programs will not run (linux.static)", v, FallbackBrandLinux))
	}
	return warnings, nil
}

// Platform is what the host offers the runtime.
type Platform struct {
	// NoLimits: rctl is off (the loader tunable kern.racct.enable is not
	// 1), so pods with limits must not run here.
	NoLimits bool
}

// DetectPlatform reads kern.racct.enable. A kernel without the sysctl has
// no racct, which also means no limits.
func DetectPlatform(ctx context.Context, r sys.Runner) (Platform, error) {
	res, err := sys.Run(ctx, r, "sysctl", "-n", "kern.racct.enable")
	var ee *sys.ExitError
	if errors.As(err, &ee) && strings.Contains(ee.Stderr, "unknown oid") {
		return Platform{NoLimits: true}, nil
	}
	if err != nil {
		return Platform{}, fmt.Errorf("detect rctl: %w", err)
	}
	return Platform{NoLimits: strings.TrimSpace(string(res.Stdout)) != "1"}, nil
}

// Startup prepares a node for the runtime: the network modules, the Linux
// ABI when linux is set (a node that cannot run Linux images must not
// start with --linux), and what the host offers. Warnings are for the
// daemon's log and status.
func Startup(ctx context.Context, r sys.Runner, linux bool) (Platform, []string, error) {
	if err := LoadModules(ctx, r, NodeModules); err != nil {
		return Platform{}, nil, err
	}
	var warnings []string
	if linux {
		w, err := EnableLinux(ctx, r)
		if err != nil {
			return Platform{}, nil, err
		}
		warnings = append(warnings, w...)
	}
	p, err := DetectPlatform(ctx, r)
	if err != nil {
		return Platform{}, nil, err
	}
	if p.NoLimits {
		warnings = append(warnings, "kern.racct.enable is not 1: rctl is off, so pods with limits will not run here (platform.noLimits)")
	}
	return p, warnings, nil
}
