package image

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// hubRegistry is how go-containerregistry names Docker Hub; Legion writes
// it docker.io in canonical references.
const hubRegistry = "index.docker.io"

// Reference is a parsed image reference.
type Reference struct {
	ref name.Reference
}

// ParseReference parses an image reference the way docker does: no
// registry means Docker Hub, no tag means latest.
func ParseReference(s string) (Reference, error) {
	if strings.TrimSpace(s) != s || s == "" {
		return Reference{}, fmt.Errorf("image reference %q: want a non-empty name without spaces", s)
	}
	r, err := name.ParseReference(s)
	if err != nil {
		return Reference{}, fmt.Errorf("image reference %q: %w", s, err)
	}
	return Reference{ref: r}, nil
}

// Registry is the registry's host[:port] as written canonically (docker.io
// for Docker Hub).
func (r Reference) Registry() string {
	reg := r.ref.Context().RegistryStr()
	if reg == hubRegistry {
		return "docker.io"
	}
	return reg
}

// Repository is registry/path, as signatures and policies name it
// (docker.io/library/nginx).
func (r Reference) Repository() string {
	return r.Registry() + "/" + r.ref.Context().RepositoryStr()
}

// String is the canonical reference: docker.io/library/nginx:latest or
// repository@sha256:....
func (r Reference) String() string {
	if d, ok := r.ref.(name.Digest); ok {
		return r.Repository() + "@" + d.DigestStr()
	}
	return r.Repository() + ":" + r.ref.Identifier()
}

// Digest is the digest a reference names, or "" for a tag.
func (r Reference) Digest() string {
	if d, ok := r.ref.(name.Digest); ok {
		return d.DigestStr()
	}
	return ""
}

// Tag is the tag a reference names, or "" for a digest.
func (r Reference) Tag() string {
	if t, ok := r.ref.(name.Tag); ok {
		return t.TagStr()
	}
	return ""
}

// WithDigest is the same repository named by digest.
func (r Reference) WithDigest(digest string) (Reference, error) {
	d, err := name.NewDigest(r.ref.Context().Name() + "@" + digest)
	if err != nil {
		return Reference{}, fmt.Errorf("image %s: digest %q: %w", r, digest, err)
	}
	return Reference{ref: d}, nil
}

// Local reports a localhost/ name: an image no registry serves, which is
// never asked for.
func (r Reference) Local() bool {
	return r.ref.Context().RegistryStr() == "localhost"
}

// Name is the go-containerregistry reference, for callers that talk to a
// registry themselves (package cosign).
func (r Reference) Name() name.Reference { return r.ref }

// Canonical parses s and returns its canonical form.
func Canonical(s string) (string, error) {
	r, err := ParseReference(s)
	if err != nil {
		return "", err
	}
	return r.String(), nil
}
