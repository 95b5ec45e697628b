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
	"golang.org/x/sync/singleflight"
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

// ResolveParallel is how many of a namespace's owners are resolved at
// once. Each owner costs a registry round trip (for a tag) and a status
// write of its own. One owner after the other, the scale run's update of
// 200 services in one namespace (internal/scale) waited for 200 status
// writes in a row, about a quarter of a second each on the busy leader:
// the 138th service's rollout began 36 s after the first's. Side by side,
// the registry questions overlap and raft commits the writes together.
const ResolveParallel = 16

// RegistryTimeout bounds one question to a registry (a tag's digest, an
// image's signatures): a registry that takes the connection and never
// answers, which any pod may name, fails its images, not the resolver.
const RegistryTimeout = 30 * time.Second

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
	// Timeout bounds one question to a registry (zero: RegistryTimeout).
	Timeout time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time

	mu      sync.Mutex
	failing map[string]*failure // by owner key
	// images holds the tags that failed to resolve, by imageKey, so owners
	// sharing an image ask the registry once per retry, not once each.
	images map[string]*failure
	// A namespace's owners are resolved by a worker of its own,
	// ResolveParallel at a time, and the namespaces' workers run side by
	// side: an owner whose registry is slow holds up its own namespace,
	// not every other one's deploys. busy holds the namespaces whose
	// worker runs, and outcomes what was found of each owner last, by
	// owner key.
	busy     map[string]bool
	outcomes map[string]outcome
	workers  sync.WaitGroup
	asking   singleflight.Group // tags being asked for, by imageKey
	done     chan struct{}      // a worker ended: pass again (buffered, 1)
}

// outcome is what was found of an owner: whether its images are
// unresolved, and when its retry is due.
type outcome struct {
	failed bool
	next   time.Time
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
	if r.Timeout == 0 {
		r.Timeout = RegistryTimeout
	}
	r.mu.Lock()
	if r.done == nil {
		r.done = make(chan struct{}, 1)
	}
	r.mu.Unlock()
}

// Run resolves after every change to services, jobs, secrets or image
// policies, when a failed owner's retry is due and when a namespace's
// worker ends, until ctx ends; then it waits for the workers, which end
// with ctx.
func (r *ImageResolver) Run(ctx context.Context) error {
	r.defaults()
	defer r.Wait()
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
		go func() {
			select {
			case <-r.done:
				cancel()
			case <-wctx.Done():
			}
		}()
		err = r.Store.WaitEvent(wctx, at, givesWork, legion.KindService, legion.KindJob, legion.KindSecret, legion.KindImagePolicy)
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

// resolvedAt reports whether an owner's images status holds its pod's
// images, the pod's hash being hash: a pass asks nothing for it.
func resolvedAt(st *legion.ImagesStatus, hash string) bool {
	return st != nil && st.PodHash == hash && st.Message == ""
}

// givesWork reports whether an event may give the resolver work: a
// Service or Job made or removed, or changed so that its status does
// not hold its pod's images (a new pod, a failure recorded), and any
// change to a Secret or an image policy. The planner's status writes
// to resolved owners (every pass of a rollout writes some) do not: each
// made the resolver list and decode every owner again.
func givesWork(ev store.Event) bool {
	if ev.Type != store.Modified {
		return true
	}
	pod, status := podImages(ev.Object)
	return pod == nil || !resolvedAt(*status, scheduler.PodHash(pod))
}

// podImages is an owner's pod and where its status records the pod's
// images; nil for an object that is no owner (a Service or a Job).
func podImages(o legion.Object) (*legion.PodSpec, **legion.ImagesStatus) {
	switch o := o.(type) {
	case *legion.Service:
		return &o.Spec.Pod, &o.Status.Images
	case *legion.Job:
		return &o.Spec.Pod, &o.Status.Images
	}
	return nil, nil
}

// Pass resolves every owner whose recorded digests are for another pod,
// leaving out those whose retry is not due yet, and waits until it is
// done; it reports whether any owner's images are still unresolved.
func (r *ImageResolver) Pass(ctx context.Context) (failed bool) {
	r.defaults()
	r.pass(ctx)
	r.Wait()
	failed, _ = r.outcome()
	return failed
}

// Wait waits for the namespaces' workers running to end.
func (r *ImageResolver) Wait() { r.workers.Wait() }

// outcome is what was found of the owners together.
func (r *ImageResolver) outcome() (failed bool, next time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.outcomes {
		failed = failed || o.failed
		if !o.next.IsZero() && (next.IsZero() || o.next.Before(next)) {
			next = o.next
		}
	}
	return failed, next
}

// pass starts a worker for each namespace with owners to resolve now and
// none running, and says what it knows: whether an owner's images are
// unresolved, and when the next retry is due (zero: none). Owners whose
// status holds their pod's images, or whose retry is not due, ask
// nothing of a registry and start no worker.
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
	due := map[string][]*attempt{} // by namespace
	var namespaces []string
	for _, kind := range []legion.Kind{legion.KindService, legion.KindJob} {
		objs, _, err := r.Store.List(kind, "", nil)
		if err != nil {
			r.Logger.Warn("listing owners to resolve", "err", err)
			return true, r.Now().Add(r.Retry)
		}
		for _, o := range objs {
			key := legion.ObjectKey(o)
			seen[key] = true
			a, retry, ok := r.prepare(key, o, pv.String())
			if a == nil {
				r.note(key, retry, ok)
				continue
			}
			ns := o.GetMetadata().Namespace
			if due[ns] == nil {
				namespaces = append(namespaces, ns)
			}
			due[ns] = append(due[ns], a)
		}
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		r.startWorker(ctx, ns, due[ns])
	}
	r.mu.Lock()
	for k := range r.outcomes {
		if !seen[k] {
			delete(r.outcomes, k)
		}
	}
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
	return r.outcome()
}

// note records an owner's outcome: unresolved until a retry at due, or ok.
func (r *ImageResolver) note(key string, due time.Time, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outcomes == nil {
		r.outcomes = map[string]outcome{}
	}
	r.outcomes[key] = outcome{failed: !ok, next: due}
}

// startWorker makes a namespace's attempts in the background,
// ResolveParallel at a time, unless the namespace's worker runs already:
// the pass its end calls for looks at them again.
func (r *ImageResolver) startWorker(ctx context.Context, ns string, attempts []*attempt) {
	r.mu.Lock()
	if r.busy[ns] {
		r.mu.Unlock()
		return
	}
	if r.busy == nil {
		r.busy = map[string]bool{}
	}
	r.busy[ns] = true
	r.workers.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.workers.Done()
		slots := make(chan struct{}, ResolveParallel)
		var tries sync.WaitGroup
		for _, a := range attempts {
			if ctx.Err() != nil {
				break
			}
			slots <- struct{}{}
			tries.Go(func() {
				defer func() { <-slots }()
				due, ok := r.try(ctx, a)
				r.note(a.key, due, ok)
			})
		}
		tries.Wait()
		r.mu.Lock()
		delete(r.busy, ns)
		r.mu.Unlock()
		select {
		case r.done <- struct{}{}:
		default: // a pass is called for already
		}
	}()
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

// attempt is one owner's pod to resolve now.
type attempt struct {
	key    string
	o      legion.Object
	pod    *legion.PodSpec
	status **legion.ImagesStatus
	hash   string
	input  string
	logins [][]byte
	f      *failure // the owner's failures so far, if any
}

// prepare says what one owner needs: nothing while its status holds its
// pod's images (ok) or its retry is not due (a retry at due), else an
// attempt.
func (r *ImageResolver) prepare(key string, o legion.Object, policies string) (a *attempt, due time.Time, ok bool) {
	pod, status := podImages(o)
	if pod == nil {
		return nil, time.Time{}, true
	}
	hash := scheduler.PodHash(pod)
	if resolvedAt(*status, hash) {
		r.forget(key, "")
		return nil, time.Time{}, true
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
	r.mu.Lock()
	f := r.failing[key]
	r.mu.Unlock()
	if f != nil && f.input == input && r.Now().Before(f.next) {
		return nil, f.next, false
	}
	return &attempt{key: key, o: o, pod: pod, status: status, hash: hash, input: input, logins: logins, f: f}, time.Time{}, false
}

// try resolves an owner's pod and writes its status when it changes,
// logging a failure only when its message changes. ok is false while the
// owner's images are unresolved, with when to try again.
func (r *ImageResolver) try(ctx context.Context, a *attempt) (due time.Time, ok bool) {
	now := r.Now()
	cur := *a.status
	res, problems := r.resolve(ctx, a.pod, a.hash, a.logins)
	if !sameImages(cur, res) {
		if err := r.writeImages(ctx, a, res); err != nil && !errors.Is(err, store.ErrConflict) {
			problems = append(problems, "writing the status: "+err.Error())
		}
	}
	if len(problems) == 0 {
		r.forget(a.key, "images resolved")
		return time.Time{}, true
	}
	msg := strings.Join(problems, "; ")
	r.mu.Lock()
	defer r.mu.Unlock()
	f := a.f
	if f == nil || f.input != a.input {
		f = &failure{input: a.input}
		if r.failing == nil {
			r.failing = map[string]*failure{}
		}
		r.failing[a.key] = f
	}
	f.count++
	f.next = now.Add(retryDelay(r.Retry, r.MaxRetry, f.count))
	if msg != f.msg {
		f.msg = msg
		r.Logger.Warn("resolving images", "owner", a.key, "err", msg, "retry", f.next.Sub(now).String())
	}
	return f.next, false
}

// writeImages writes res as the owner's images status. The planner
// writes the owner's status too, so the version read may be gone by
// then: in the scale run a third of these writes met a status written
// since, and each such owner waited for the namespace's next round. On a
// conflict the owner is read again and, while it is the same owner with
// the pod resolved, res is written over its fresh status, up to
// conflictRetries times; a conflict that stands is the caller's.
func (r *ImageResolver) writeImages(ctx context.Context, a *attempt, res *legion.ImagesStatus) error {
	o := a.o
	for tries := 0; ; tries++ {
		_, status := podImages(o)
		*status = res
		err := r.Store.WriteStatus(ctx, o, store.Precondition{Version: o.GetMetadata().Version})
		if !errors.Is(err, store.ErrConflict) || tries == conflictRetries {
			return err
		}
		m := o.GetMetadata()
		fresh, _, gerr := r.Store.Get(o.GetKind(), m.Namespace, m.Name)
		if gerr != nil {
			return err // gone, or unreadable: the next pass sees
		}
		pod, st := podImages(fresh)
		if pod == nil || fresh.GetMetadata().UID != m.UID || scheduler.PodHash(pod) != a.hash {
			return err // another owner or another pod now: resolved again
		}
		if sameImages(*st, res) {
			return nil
		}
		o = fresh
	}
}

// conflictRetries bounds writeImages' writes again after a conflict.
const conflictRetries = 3

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
// due: then the last error stands. Owners resolved at once that share a
// tag share one question, and so count one failure, not one each.
func (r *ImageResolver) resolveImage(ctx context.Context, ref string, logins [][]byte) (string, error) {
	key := imageKey(ref, logins)
	d, err, _ := r.asking.Do(key, func() (any, error) { return r.askRegistry(ctx, key, ref, logins) })
	return d.(string), err
}

// askRegistry is resolveImage's one question, key being the tag's
// imageKey.
func (r *ImageResolver) askRegistry(ctx context.Context, key, ref string, logins [][]byte) (string, error) {
	now := r.Now()
	r.mu.Lock()
	f := r.images[key]
	r.mu.Unlock()
	if f != nil && now.Before(f.next) {
		return "", errors.New(f.msg)
	}
	rctx, cancel := context.WithTimeout(ctx, r.Timeout)
	d, err := r.Resolve(rctx, ref, logins)
	// Only the deadline says the registry was silent: after cancel every
	// context reads as done, whatever the error was.
	timedOut := errors.Is(rctx.Err(), context.DeadlineExceeded)
	cancel()
	if err != nil && timedOut && ctx.Err() == nil {
		err = fmt.Errorf("the registry did not answer within %s (%w)", r.Timeout, err)
	}
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
		cctx, cancel := context.WithTimeout(ctx, r.Timeout)
		verified, warnings, err := r.Check(cctx, c.Image, d, logins)
		if err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("checking its signatures: the registry did not answer within %s (%w)", r.Timeout, err)
		}
		cancel()
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
