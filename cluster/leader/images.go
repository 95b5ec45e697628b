package leader

import (
	"context"
	"errors"
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/controller"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/image/cosign"
)

// Check verifies resolved images against the cluster's ImagePolicies
// (6.1 "Signatures"), reading the policies from the replica at each check
// so a changed policy applies from the next resolution.
func Check(st *store.Store, reg *image.Registry) controller.CheckFunc {
	return func(ctx context.Context, ref, digest string, configs [][]byte) (*legion.VerifiedImage, []string, error) {
		policies, err := imagePolicies(st)
		if err != nil || len(policies) == 0 {
			return nil, nil, err
		}
		r, err := image.ParseReference(ref)
		if err != nil {
			return nil, nil, err
		}
		pinned, err := image.ParseReference(r.Repository() + "@" + digest)
		if err != nil {
			return nil, nil, err
		}
		d, err := cosign.Check(ctx, reg, policies, pinned, loginFor(r, configs))
		var verified *legion.VerifiedImage
		if d.Verified != nil {
			verified = &legion.VerifiedImage{Digest: d.Verified.Digest, Key: d.Verified.KeyFingerprint}
		}
		if err != nil {
			if errors.Is(err, cosign.ErrUnsigned) || errors.Is(err, cosign.ErrBadSignature) || errors.Is(err, cosign.ErrUnreadable) {
				return verified, d.Warnings, fmt.Errorf("held by image policy: %w", err)
			}
			return verified, d.Warnings, err
		}
		return verified, d.Warnings, nil
	}
}

// Covers names the image policies covering an image's repository, for
// the resolver to check images the node never asks a registry for.
func Covers(st *store.Store) controller.CoverFunc {
	return func(ref string) ([]string, bool, error) {
		policies, err := imagePolicies(st)
		if err != nil || len(policies) == 0 {
			return nil, false, err
		}
		r, err := image.ParseReference(ref)
		if err != nil {
			return nil, false, err
		}
		var names []string
		enforced := false
		for _, p := range policies {
			if p.Covers(r.Repository()) {
				names = append(names, p.Name)
				enforced = enforced || p.Mode != cosign.Warn
			}
		}
		return names, enforced, nil
	}
}

// imagePolicies reads the cluster's ImagePolicies as cosign takes them.
func imagePolicies(st *store.Store) ([]cosign.Policy, error) {
	objs, _, err := st.List(legion.KindImagePolicy, "", nil)
	if err != nil {
		return nil, err
	}
	var policies []cosign.Policy
	for _, o := range objs {
		p := o.(*legion.ImagePolicy)
		cp := cosign.Policy{Name: p.Metadata.Name, Patterns: p.Spec.Repositories, Mode: cosign.Mode(p.Spec.Mode)}
		for _, k := range p.Spec.Keys {
			cp.Keys = append(cp.Keys, []byte(k))
		}
		policies = append(policies, cp)
	}
	return policies, nil
}

// Resolve names the digest a tag points to by asking its registry, with
// the login a pod's pull secrets hold for that registry. The leader needs
// no image store for it, so a manager without an agent resolves too.
func Resolve(reg *image.Registry) controller.ResolveFunc {
	return func(ctx context.Context, ref string, configs [][]byte) (string, error) {
		r, err := image.ParseReference(ref)
		if err != nil {
			return "", err
		}
		return reg.Resolve(ctx, r, loginFor(r, configs))
	}
}

// loginFor finds the login the Docker configs hold for a reference's
// registry.
func loginFor(r image.Reference, configs [][]byte) *image.Login {
	for _, c := range configs {
		logins, err := image.ParseDockerConfig(c)
		if err != nil {
			continue
		}
		if l, ok := logins.For(r.Registry()); ok {
			return &l
		}
	}
	return nil
}
