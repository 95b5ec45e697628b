//go:build !freebsd

package jail

// hostSysctl is nil: only FreeBSD's kernel has the records the memory
// count reads.
var hostSysctl Sysctl
