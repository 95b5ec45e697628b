//go:build freebsd

package jail

import "golang.org/x/sys/unix"

// hostSysctl reads the kernel's sysctls (KernelVM.Sysctl).
var hostSysctl Sysctl = func(name string, args ...int) ([]byte, error) {
	return unix.SysctlRaw(name, args...)
}
