package cosign

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"

	"github.com/legionbsd/legion/image"
)

// Mode says what a policy does with an image without a good signature.
type Mode string

const (
	// Enforce (the default) holds the pod.
	Enforce Mode = "enforce"
	// Warn runs it and says what was found.
	Warn Mode = "warn"
)

// Policy is an ImagePolicy's content: repository patterns, PEM public
// keys and a mode.
type Policy struct {
	Name     string
	Patterns []string
	Keys     [][]byte
	Mode     Mode
}

// Validate checks what Apply refuses: a pattern without a registry, a
// key that does not read, an unknown mode.
func (p Policy) Validate() error {
	if len(p.Patterns) == 0 {
		return fmt.Errorf("policy %s: patterns: want at least one", p.Name)
	}
	for i, pat := range p.Patterns {
		if err := ValidatePattern(pat); err != nil {
			return fmt.Errorf("policy %s: patterns[%d]: %w", p.Name, i, err)
		}
	}
	if len(p.Keys) == 0 {
		return fmt.Errorf("policy %s: keys: want at least one", p.Name)
	}
	for i, k := range p.Keys {
		if _, err := ParsePublicKey(k); err != nil {
			return fmt.Errorf("policy %s: keys[%d]: %w", p.Name, i, err)
		}
	}
	switch p.Mode {
	case "", Enforce, Warn:
	default:
		return fmt.Errorf("policy %s: mode %q: want enforce or warn", p.Name, p.Mode)
	}
	return nil
}

// Covers reports whether a pattern of the policy matches a repository.
func (p Policy) Covers(repository string) bool {
	for _, pat := range p.Patterns {
		if Match(pat, repository) {
			return true
		}
	}
	return false
}

func (p Policy) keys() ([]*ecdsa.PublicKey, error) {
	var out []*ecdsa.PublicKey
	for i, k := range p.Keys {
		pk, err := ParsePublicKey(k)
		if err != nil {
			return nil, fmt.Errorf("policy %s: keys[%d]: %w", p.Name, i, err)
		}
		out = append(out, pk)
	}
	return out, nil
}

// Decision is what the policies say of one image.
type Decision struct {
	// Covered: some policy names the image's repository.
	Covered bool
	// Verified: the good signature found (the first policy's).
	Verified *Result
	// Warnings from warn-mode policies the image failed.
	Warnings []string
}

// Check verifies an image, named by digest (the index's for an image of
// several platforms, as signed), against every policy covering its
// repository. An enforce policy it fails makes the error, which wraps
// ErrUnsigned, ErrBadSignature or ErrUnreadable; a warn policy adds a
// warning.
func Check(ctx context.Context, reg *image.Registry, policies []Policy, ref image.Reference, login *image.Login) (Decision, error) {
	var d Decision
	if ref.Digest() == "" {
		return d, fmt.Errorf("check %s: want a reference by digest", ref)
	}
	var errs []error
	for _, p := range policies {
		if !p.Covers(ref.Repository()) {
			continue
		}
		d.Covered = true
		keys, err := p.keys()
		if err != nil {
			return d, err
		}
		res, err := Verify(ctx, reg, ref, keys, login)
		if err == nil {
			if d.Verified == nil {
				d.Verified = &res
			}
			continue
		}
		if p.Mode == Warn {
			d.Warnings = append(d.Warnings, fmt.Sprintf("policy %s: %v", p.Name, err))
			continue
		}
		errs = append(errs, fmt.Errorf("policy %s: %w", p.Name, err))
	}
	if len(errs) > 0 {
		return d, errors.Join(errs...)
	}
	return d, nil
}
