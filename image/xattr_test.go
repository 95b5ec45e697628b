package image

import "golang.org/x/sys/unix"

func getxattr(p, name string, buf []byte) (int, error) { return unix.Lgetxattr(p, name, buf) }
