// Package sys is the one door through which Legion runs host commands
// (jail, jexec, ifconfig, route, pfctl, wg, rctl, zfs, sysctl, kldload,
// mount_nullfs, ...).
//
// Every FreeBSD primitive goes through a Runner, so the code that decides
// which commands to run can be tested on any host: Exec runs them for real,
// Fake records each command and answers from a script. Tests assert the
// exact command lines and how each answer is handled.
//
// This package imports only the standard library.
package sys
