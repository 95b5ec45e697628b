package image

import (
	"fmt"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Platform is an image's operating system and architecture in OCI terms
// (freebsd/amd64, linux/arm64).
type Platform struct {
	OS      string `json:"os"`
	Arch    string `json:"architecture"`
	Variant string `json:"variant,omitempty"`
}

func (p Platform) String() string {
	s := p.OS + "/" + p.Arch
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// PlatformRule is what a node runs: FreeBSD images of its architecture,
// and Linux ones of the same architecture when started with --linux (6.6).
type PlatformRule struct {
	Arch       string // OCI architecture: amd64, arm64
	AllowLinux bool
}

// wanted is the order of preference.
func (r PlatformRule) wanted() []Platform {
	w := []Platform{{OS: "freebsd", Arch: r.Arch}}
	if r.AllowLinux {
		w = append(w, Platform{OS: "linux", Arch: r.Arch})
	}
	return w
}

func (r PlatformRule) describe() string {
	var s []string
	for _, p := range r.wanted() {
		s = append(s, p.String())
	}
	return strings.Join(s, " or ")
}

// Accepts reports whether an image of platform p may run under r.
func (r PlatformRule) Accepts(p Platform) bool {
	for _, w := range r.wanted() {
		if p.OS == w.OS && p.Arch == w.Arch {
			return true
		}
	}
	return false
}

// ErrPlatform is returned when an image offers no platform a node runs.
type ErrPlatform struct {
	Image  string
	Offers []Platform
	Rule   PlatformRule
}

func (e *ErrPlatform) Error() string {
	var offers []string
	for _, p := range e.Offers {
		offers = append(offers, p.String())
	}
	sort.Strings(offers)
	if len(offers) == 0 {
		offers = []string{"no platform"}
	}
	hint := ""
	if !e.Rule.AllowLinux {
		for _, p := range e.Offers {
			if p.OS == "linux" && p.Arch == e.Rule.Arch {
				hint = " (Linux images run only on nodes started with --linux)"
			}
		}
	}
	return fmt.Sprintf("image %s offers %s; this node runs %s%s", e.Image, strings.Join(offers, ", "), e.Rule.describe(), hint)
}

// Pick chooses the manifest of an index to run: freebsd/<arch> first,
// then linux/<arch> when allowed. Entries without a platform (attestations)
// are ignored.
func (r PlatformRule) Pick(image string, idx *v1.IndexManifest) (v1.Descriptor, Platform, error) {
	var offers []Platform
	for _, d := range idx.Manifests {
		if d.Platform == nil || d.Platform.OS == "unknown" || d.Platform.OS == "" {
			continue
		}
		offers = append(offers, Platform{OS: d.Platform.OS, Arch: d.Platform.Architecture, Variant: d.Platform.Variant})
	}
	for _, w := range r.wanted() {
		for _, d := range idx.Manifests {
			if d.Platform == nil || d.Platform.OS != w.OS || d.Platform.Architecture != w.Arch {
				continue
			}
			if !d.MediaType.IsImage() {
				continue
			}
			return d, Platform{OS: d.Platform.OS, Arch: d.Platform.Architecture, Variant: d.Platform.Variant}, nil
		}
	}
	return v1.Descriptor{}, Platform{}, &ErrPlatform{Image: image, Offers: offers, Rule: r}
}
