package legion

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// ValidImage checks an image reference as a node will pull it: the
// grammar go-containerregistry parses (the image package's), a name of at
// most MaxImageName characters and the whole of at most MaxImageReference.
// A refused reference is quoted only when short enough to read.
func ValidImage(ref string) error {
	switch {
	case strings.TrimSpace(ref) == "":
		return fmt.Errorf("missing")
	case len(ref) > MaxImageReference:
		return fmt.Errorf("%d characters, at most %d allowed (a name of %d and a tag or digest)",
			len(ref), MaxImageReference, MaxImageName)
	case strings.ContainsAny(ref, " \t\r\n"):
		return fmt.Errorf("%q: an image reference has no spaces", ref)
	}
	if n := len(imageName(ref)); n > MaxImageName {
		return fmt.Errorf("the name (registry and repository) is %d characters, at most %d allowed", n, MaxImageName)
	}
	if _, err := name.ParseReference(ref); err != nil {
		return fmt.Errorf("%q is not an image reference: expected [registry/]repository[:tag][@digest]", ref)
	}
	return nil
}

// imageName is a reference without its digest and tag, as written.
func imageName(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref
}
