package legion

import (
	"path"
	"strings"
)

// admitHostPath checks a host path volume's path: absolute and clean, as
// the node mounts it as written (a relative path would depend on the
// daemon's directory, and compose's ./dir is resolved at convert time).
func admitHostPath(p, field string, errs *ErrorList) {
	switch {
	case p == "":
		errs.add(field, "missing: the node's path to mount")
	case !withinLength(p, MaxText, field, errs):
	case !strings.HasPrefix(p, "/"):
		errs.add(field, "%q is not an absolute path", p)
	case path.Clean(p) != p:
		errs.add(field, "%q is not clean: write %s", p, path.Clean(p))
	case p == "/":
		errs.add(field, "the node's root cannot be mounted into a container")
	case strings.ContainsRune(p, 0):
		errs.add(field, "a path holds no NUL byte")
	}
}
