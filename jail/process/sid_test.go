package process_test

import "golang.org/x/sys/unix"

func unixGetsid(pid int) (int, error) { return unix.Getsid(pid) }
