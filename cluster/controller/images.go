package controller

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
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

// CoverFunc names the image policies whose patterns cover an image's
// repository, and says whether one of them enforces.
type CoverFunc func(ref string) (policies []string, enforced bool, err error)

// Retries of an owner whose images failed to resolve or check: the
// first after RetryFirst, doubling per failure in a row up to RetryMax.
// A change of the owner's spec, of its pull secrets or of the image
// policies, and a success, start it over.
const (
	RetryFirst = time.Second
	RetryMax   = 5 * time.Minute
)

// ImageResolver pins the tags of every Service's and Job's pod to
// digests once per pod deployed (6.1 "Identity"), recording them on the
// owner's status keyed by the pod's hash, so scaling keeps them and tasks
// run what was resolved, not what a tag names later.
type ImageResolver struct {
	Store   *store.Store
	Resolve ResolveFunc
	// Check, when set, verifies each resolved image's signature against
	// the ImagePolicies covering it; the results go to status.images.
	Check CheckFunc
	// Covers, when set, says which images a policy covers: an image the
	// node never asks a registry for (pullPolicy never, a localhost/
	// name) is checked only when one does, and held when it cannot be.
	Covers CoverFunc
	Logger *slog.Logger
	// Retry is how soon an owner whose resolution failed is first tried
	// again (zero: RetryFirst); the delay doubles per failure in a row up
	// to MaxRetry (zero: RetryMax).
	Retry    time.Duration
	MaxRetry time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu      sync.Mutex
	failing map[string]*failure // by owner key
	// images holds the tags that failed to resolve, by imageKey, so owners
	// sharing an image ask the registry once per retry, not once each.
	images map[string]*failure
}

// failure is an owner's run of failed attempts for one input.
type failure struct {
	input string // what was tried: see inputOf
	count int    // failures in a row
	next  time.Time
	msg   string // the error last logged
}

// needsResolving: an image a registry serves is resolved (a tag) and
// checked against the image policies (a tag or a digest); a local image
// and an image the pod never pulls ask no registry.
func needsResolving(c *legion.Container) bool {
	return c.PullPolicy != legion.PullNever && !strings.HasPrefix(c.Image, "localhost/")
}

func (r *ImageResolver) defaults() {
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Retry == 0 {
		r.Retry = RetryFirst
	}
	if r.MaxRetry == 0 {
		r.MaxRetry = RetryMax
	}
	if r.Now == nil {
		r.Now = time.Now
	}
}

// Run resolves after every change to services, jobs, secrets or image
// policies, and when a failed owner's retry is due, until ctx ends.
func (r *ImageResolver) Run(ctx context.Context) error {
	r.defaults()
	for ctx.Err() == nil {
		at, err := r.Store.Version()
		if err != nil {
			return err
		}
		_, next := r.pass(ctx)
		wctx, cancel := context.WithCancel(ctx)
		var retry *time.Timer
		if !next.IsZero() {
			retry = time.AfterFunc(max(next.Sub(r.Now()), 0), cancel)
		}
		err = r.Store.WaitChange(wctx, at, legion.KindService, legion.KindJob, legion.KindSecret, legion.KindImagePolicy)
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

// Pass resolves every owner whose recorded digests are for another pod,
// leaving out those whose retry is not due yet; it reports whether any
// owner's images are still unresolved.
func (r *ImageResolver) Pass(ctx context.Context) (failed bool) {
	r.defaults()
	failed, _ = r.pass(ctx)
	return failed
}

// pass is Pass, also saying when the next retry is due (zero: none).
func (r *ImageResolver) pass(ctx context.Context) (failed bool, next time.Time) {
	policies, _, err := r.Store.List(legion.KindImagePolicy, "", nil)
	if err != nil {
		r.Logger.Warn("listing image policies", "err", err)
		return true, r.Now().Add(r.Retry)
	}
	var pv strings.Builder
	for _, p := range policies {
		fmt.Fprintf(&pv, "%s@%d,", p.GetMetadata().Name, p.GetMetadata().Version)
	}
	seen := map[string]bool{}
	for _, kind := range []legion.Kind{legion.KindService, legion.KindJob} {
		objs, _, err := r.Store.List(kind, "", nil)
		if err != nil {
			r.Logger.Warn("listing owners to resolve", "err", err)
			return true, r.Now().Add(r.Retry)
		}
		for _, o := range objs {
			key := legion.ObjectKey(o)
			seen[key] = true
			due, ok := r.resolveOwner(ctx, key, o, pv.String())
			if !ok {
				failed = true
				if next.IsZero() || due.Before(next) {
					next = due
				}
			}
		}
	}
	r.mu.Lock()
	for k := range r.failing {
		if !seen[k] {
			delete(r.failing, k)
		}
	}
	// A tag no owner asked for since long after its retry was due is no
	// longer used.
	now := r.Now()
	for k, f := range r.images {
		if now.After(f.next.Add(r.MaxRetry)) {
			delete(r.images, k)
		}
	}
	r.mu.Unlock()
	return failed, next
}

// inputOf is what an attempt depends on beyond the registry: the owner
// (uid, so one made again starts over, and generation, bumped by a spec
// change), the pod, its pull secrets' versions and the image policies'.
func inputOf(o legion.Object, hash string, secrets []legion.Object, policies string) string {
	m := o.GetMetadata()
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%d/%s/", m.UID, m.Generation, hash)
	for _, s := range secrets {
		fmt.Fprintf(&b, "%s@%d,", s.GetMetadata().Name, s.GetMetadata().Version)
	}
	b.WriteString("/" + policies)
	return b.String()
}

// resolveOwner resolves one owner's pod unless its status already holds
// it or its retry is not due. It writes the status only when it changes,
// and logs a failure only when its message changes. ok is false while the
// owner's images are unresolved, with when to try again.
func (r *ImageResolver) resolveOwner(ctx context.Context, key string, o legion.Object, policies string) (due time.Time, ok bool) {
	var pod *legion.PodSpec
	var status **legion.ImagesStatus
	switch o := o.(type) {
	case *legion.Service:
		pod, status = &o.Spec.Pod, &o.Status.Images
	case *legion.Job:
		pod, status = &o.Spec.Pod, &o.Status.Images
	default:
		return time.Time{}, true
	}
	hash := scheduler.PodHash(pod)
	cur := *status
	if cur != nil && cur.PodHash == hash && cur.Message == "" {
		r.forget(key, "")
		return time.Time{}, true
	}
	ns := o.GetMetadata().Namespace
	var secrets []legion.Object
	var logins [][]byte
	for _, name := range pod.ImagePullSecrets {
		s, _, err := r.Store.Get(legion.KindSecret, ns, name)
		if err != nil {
			continue
		}
		secrets = append(secrets, s)
		logins = append(logins, s.(*legion.Secret).Spec.Data)
	}
	input := inputOf(o, hash, secrets, policies)
	now := r.Now()
	r.mu.Lock()
	f := r.failing[key]
	r.mu.Unlock()
	if f != nil && f.input == input && now.Before(f.next) {
		return f.next, false
	}
	res, problems := r.resolve(ctx, pod, hash, logins)
	if !sameImages(cur, res) {
		*status = res
		err := r.Store.WriteStatus(ctx, o, store.Precondition{Version: o.GetMetadata().Version})
		if err != nil && !errors.Is(err, store.ErrConflict) {
			problems = append(problems, "writing the status: "+err.Error())
		}
	}
	if len(problems) == 0 {
		r.forget(key, "images resolved")
		return time.Time{}, true
	}
	msg := strings.Join(problems, "; ")
	r.mu.Lock()
	defer r.mu.Unlock()
	if f == nil || f.input != input {
		f = &failure{input: input}
		if r.failing == nil {
			r.failing = map[string]*failure{}
		}
		r.failing[key] = f
	}
	f.count++
	f.next = now.Add(retryDelay(r.Retry, r.MaxRetry, f.count))
	if msg != f.msg {
		f.msg = msg
		r.Logger.Warn("resolving images", "owner", key, "err", msg, "retry", f.next.Sub(now).String())
	}
	return f.next, false
}

// forget drops an owner's failures; said, when not empty, is logged if
// it had any.
func (r *ImageResolver) forget(key, said string) {
	r.mu.Lock()
	f := r.failing[key]
	delete(r.failing, key)
	r.mu.Unlock()
	if f != nil && said != "" {
		r.Logger.Info(said, "owner", key, "after", f.count)
	}
}

// retryDelay is first doubled per failure in a row after the first,
// capped at limit.
func retryDelay(first, limit time.Duration, failures int) time.Duration {
	d := first
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// imageKey is what a tag's resolution depends on: the tag and the
// registry logins it is asked with.
func imageKey(ref string, logins [][]byte) string {
	h := sha256.New()
	for _, l := range logins {
		h.Write(l)
		h.Write([]byte{0})
	}
	return ref + "@" + hex.EncodeToString(h.Sum(nil))
}

// resolveImage asks the registry for a tag's digest, unless the tag
// failed lately and its retry (the same schedule as an owner's) is not
// due: then the last error stands.
func (r *ImageResolver) resolveImage(ctx context.Context, ref string, logins [][]byte) (string, error) {
	key, now := imageKey(ref, logins), r.Now()
	r.mu.Lock()
	f := r.images[key]
	r.mu.Unlock()
	if f != nil && now.Before(f.next) {
		return "", errors.New(f.msg)
	}
	d, err := r.Resolve(ctx, ref, logins)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.images, key)
		return d, nil
	}
	if f == nil {
		f = &failure{}
		if r.images == nil {
			r.images = map[string]*failure{}
		}
		r.images[key] = f
	}
	f.count++
	f.next, f.msg = now.Add(retryDelay(r.Retry, r.MaxRetry, f.count)), err.Error()
	return "", err
}

// sameImages: writing b over a would store the same status.
func sameImages(a, b *legion.ImagesStatus) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// resolve pins the pod's tags and checks its images against the image
// policies, saying what failed.
func (r *ImageResolver) resolve(ctx context.Context, pod *legion.PodSpec, hash string, logins [][]byte) (*legion.ImagesStatus, []string) {
	res := &legion.ImagesStatus{PodHash: hash, Digests: map[string]string{}}
	var problems []string
	warn := func(image, w string) {
		if res.Warning != "" {
			res.Warning += "; "
		}
		res.Warning += image + ": " + w
	}
	seen := map[string]bool{}
	for _, c := range pod.AllContainers() {
		if seen[c.Image] {
			continue
		}
		seen[c.Image] = true
		// pin: the node runs the digest named here; warnOnly: only warn-mode
		// policies make this image's check, so failing it holds nothing.
		pin, warnOnly := needsResolving(c), false
		if !pin {
			var names []string
			var enforced bool
			var err error
			if r.Covers != nil {
				names, enforced, err = r.Covers(c.Image)
			}
			switch {
			case err != nil:
				problems = append(problems, fmt.Sprintf("%s: reading the image policies: %v", c.Image, err))
				continue
			case len(names) == 0:
				continue
			case strings.HasPrefix(c.Image, "localhost/"):
				why := "image policy " + strings.Join(names, ", ") + ": a localhost/ image is in no registry, so no signature of it can be checked"
				if enforced {
					problems = append(problems, c.Image+": held by "+why)
				} else {
					warn(c.Image, why)
				}
				continue
			}
			// pullPolicy never is no way round a policy: the image is
			// checked at its registry as any other, and under an enforcing
			// policy the node runs the very digest checked, from its store.
			pin, warnOnly = enforced, !enforced
		}
		d, pinned := "", false
		if _, dg, ok := strings.Cut(c.Image, "@"); ok {
			d, pinned = dg, true // by digest: nothing to resolve, only to check
		} else {
			var err error
			if d, err = r.resolveImage(ctx, c.Image, logins); err != nil {
				if warnOnly {
					warn(c.Image, "not checked against the image policies: "+err.Error())
				} else {
					problems = append(problems, fmt.Sprintf("%s: %v", c.Image, err))
				}
				continue
			}
		}
		if pin && !pinned {
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
			warn(c.Image, w)
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		res.Message = "cannot resolve " + strings.Join(problems, "; ")
	}
	if len(res.Digests) == 0 {
		res.Digests = nil
	}
	return res, problems
}
