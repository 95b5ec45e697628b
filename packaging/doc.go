// Package packaging holds no code: its tests check the FreeBSD packaging
// kept beside it (freebsd/sysutils/legion: the port and its rc.d script)
// and the release script (release), so that a change to the CLI or the
// daemon's flags that breaks them fails here, on any host.
package packaging
