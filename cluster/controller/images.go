package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"github.com/legionbsd/legion/scheduler"
)

// ResolveFunc names the digest a tag points to now, with the registry
// login (a Docker config's bytes) the pod's pull secrets give, if any.
type ResolveFunc func(ctx context.Context, ref string, dockerConfigs [][]byte) (string, error)

// CheckFunc checks an image, as resolved to digest, against the cluster's
// image policies: a good signature found (nil when no policy covers it or
// none verified under warn), warnings from warn-mode policies, and an
// error when an enforce-mode policy refuses it.
type CheckFunc func(ctx context.Context, ref, digest string, dockerConfigs [][]byte) (*legion.VerifiedImage, []string, error)

// ImageResolver pins the tags of every Service's and Job's pod to
// digests once per pod deployed (6.1 "Identity"), recording them on the
// owner's status keyed by the pod's hash, so scaling keeps them and tasks
// run what was resolved, not what a tag names later.
type ImageResolver struct {
	Store   *store.Store
	Resolve ResolveFunc
	// Check, when set, verifies each resolved image's signature against
	// the ImagePolicies covering it; the results go to status.images.
	Check  CheckFunc
	Logger *slog.Logger
	// Retry is how soon an owner whose resolution failed is tried again.
	Retry time.Duration
}

// needsResolving: an image a registry serves is resolved (a tag) and
// checked against the image policies (a tag or a digest); a local image
// and an image the pod never pulls ask no registry.
func needsResolving(c *legion.Container) bool {
	return c.PullPolicy != legion.PullNever && !strings.HasPrefix(c.Image, "localhost/")
}

// Run resolves after every change to services, jobs or secrets, and
// retries failures, until ctx ends.
func (r *ImageResolver) Run(ctx context.Context) error {
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Retry == 0 {
		r.Retry = 30 * time.Second
	}
	for ctx.Err() == nil {
		at, err := r.Store.Version()
		if err != nil {
			return err
		}
		failed := r.Pass(ctx)
		wctx, cancel := context.WithCancel(ctx)
		var retry *time.Timer
		if failed {
			retry = time.AfterFunc(r.Retry, cancel)
		}
		err = r.Store.WaitChange(wctx, at, legion.KindService, legion.KindJob, legion.KindSecret)
		if retry != nil {
			retry.Stop()
		}
		cancel()
		if err != nil && wctx.Err() == nil {
			return err
		}
	}
	return nil
}

// Pass resolves every owner whose recorded digests are for another pod;
// it reports whether any failed.
func (r *ImageResolver) Pass(ctx context.Context) (failed bool) {
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	for _, kind := range []legion.Kind{legion.KindService, legion.KindJob} {
		objs, _, err := r.Store.List(kind, "", nil)
		if err != nil {
			r.Logger.Warn("listing owners to resolve", "err", err)
			return true
		}
		for _, o := range objs {
			if err := r.resolveOwner(ctx, o); err != nil {
				failed = true
				r.Logger.Warn("resolving images", "owner", legion.ObjectKey(o), "err", err)
			}
		}
	}
	return failed
}

func (r *ImageResolver) resolveOwner(ctx context.Context, o legion.Object) error {
	var pod *legion.PodSpec
	var status **legion.ImagesStatus
	switch o := o.(type) {
	case *legion.Service:
		pod, status = &o.Spec.Pod, &o.Status.Images
	case *legion.Job:
		pod, status = &o.Spec.Pod, &o.Status.Images
	default:
		return nil
	}
	hash := scheduler.PodHash(pod)
	if cur := *status; cur != nil && cur.PodHash == hash && cur.Message == "" {
		return nil
	}
	ns := o.GetMetadata().Namespace
	var logins [][]byte
	for _, name := range pod.ImagePullSecrets {
		s, _, err := r.Store.Get(legion.KindSecret, ns, name)
		if err != nil {
			continue
		}
		logins = append(logins, s.(*legion.Secret).Spec.Data)
	}
	res := &legion.ImagesStatus{PodHash: hash, Digests: map[string]string{}}
	var problems []string
	seen := map[string]bool{}
	for _, c := range pod.AllContainers() {
		if !needsResolving(c) || seen[c.Image] {
			continue
		}
		seen[c.Image] = true
		d, pinned := "", false
		if _, dg, ok := strings.Cut(c.Image, "@"); ok {
			d, pinned = dg, true // by digest: nothing to resolve, only to check
		} else {
			var err error
			if d, err = r.Resolve(ctx, c.Image, logins); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", c.Image, err))
				continue
			}
		}
		if !pinned {
			res.Digests[c.Image] = d
		}
		if r.Check == nil {
			continue
		}
		verified, warnings, err := r.Check(ctx, c.Image, d, logins)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", c.Image, err))
		}
		if verified != nil {
			if res.Verified == nil {
				res.Verified = map[string]legion.VerifiedImage{}
			}
			res.Verified[c.Image] = *verified
		}
		for _, w := range warnings {
			if res.Warning != "" {
				res.Warning += "; "
			}
			res.Warning += c.Image + ": " + w
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		res.Message = "cannot resolve " + strings.Join(problems, "; ")
	}
	if len(res.Digests) == 0 {
		res.Digests = nil
	}
	*status = res
	_, err := r.Store.PutStatus(ctx, o, store.Precondition{Version: o.GetMetadata().Version})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return err
	}
	if len(problems) > 0 {
		return errors.New(res.Message)
	}
	return nil
}
