package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// ErrNotPresent: the image is not in the store and may not be pulled
// (pullPolicy never, a localhost/ name), or is private to other namespaces.
var ErrNotPresent = errors.New("image not present")

// PullPolicy says when a pull asks the registry.
type PullPolicy string

const (
	// IfNotPresent (the default) asks only when the store lacks the image.
	IfNotPresent PullPolicy = "IfNotPresent"
	// Always resolves the tag again and pulls what changed.
	Always PullPolicy = "Always"
	// Never asks no registry: the image must be in the store.
	Never PullPolicy = "Never"
)

// DefaultMaxUnused is how long an image no one used stays (6.1 Removal).
const DefaultMaxUnused = time.Hour

// Options configure Images.
type Options struct {
	// DataDir holds images/index.json, the lock, pins and temporary files.
	DataDir  string
	Store    Store
	Registry *Registry
	Platform PlatformRule
	// Flags clears and sets file flags; nil picks the host's (chflags on
	// FreeBSD, none elsewhere).
	Flags    FileFlags
	Progress Progress
	Log      *slog.Logger
	// KeepBlobs keeps the blobs pulls verified, as they came (build
	// hosts), so pushes and exports send the image unchanged.
	KeepBlobs bool
	// ProgressDeadline is how long a layer may go without a byte coming
	// before its pull fails (zero: DefaultProgressDeadline).
	ProgressDeadline time.Duration
}

// DefaultProgressDeadline is how long a layer may go without a byte
// coming (kubelet's image-pull-progress-deadline, and its default). A
// registry that stops sending mid-layer, or sends a byte a minute,
// would otherwise hold the layer's lock for good, and every pull of an
// image that shares the layer, whoever's, waits for that lock.
const DefaultProgressDeadline = time.Minute

// ErrStalled: a layer went longer than the progress deadline without a
// byte coming.
var ErrStalled = errors.New("the registry stopped sending")

// Images is a node's (or build host's) image store: the index, the layer
// store and the registry client together.
type Images struct {
	o     Options
	dir   string
	index *indexStore
	owner bool

	mu     sync.Mutex
	layers map[string]*sync.Mutex // one pull writes a layer at a time
}

// Open prepares the store's directories under o.DataDir.
func Open(o Options) (*Images, error) {
	if o.DataDir == "" || o.Store == nil {
		return nil, fmt.Errorf("image store: DataDir and Store are required")
	}
	if o.Platform.Arch == "" {
		return nil, fmt.Errorf("image store: Platform.Arch is required")
	}
	if o.Registry == nil {
		o.Registry = &Registry{}
	}
	if o.Flags == nil {
		o.Flags = defaultFileFlags()
	}
	if o.Progress == nil {
		o.Progress = noProgress{}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ProgressDeadline == 0 {
		o.ProgressDeadline = DefaultProgressDeadline
	}
	dir := filepath.Join(o.DataDir, "images")
	for _, d := range []string{dir, filepath.Join(dir, "tmp"), filepath.Join(dir, "pins")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
	}
	return &Images{o: o, dir: dir, index: &indexStore{dir: dir}, owner: os.Geteuid() == 0, layers: map[string]*sync.Mutex{}}, nil
}

// PullOptions say who pulls and how.
type PullOptions struct {
	// Namespace asking; private images are visible to the namespaces that
	// pulled them with a login.
	Namespace string
	// Login for the image's registry; nil pulls anonymously, and the
	// image is anyone's.
	Login  *Login
	Policy PullPolicy
	Now    time.Time

	// stop cancels the context the registry client reads the image
	// with, so a layer failing ends the other layers' requests too.
	stop context.CancelFunc
}

// Resolve returns the digest a reference names now (the index's for an
// image of several platforms), asking the registry unless the reference
// is a digest.
func (m *Images) Resolve(ctx context.Context, ref string, login *Login) (string, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return "", err
	}
	return m.o.Registry.Resolve(ctx, r, login)
}

// lookup finds a stored image for a reference: by canonical name, or for
// a digest any image of that repository with that digest.
func lookup(f *indexFile, ref Reference) *Record {
	if r := f.Images[ref.String()]; r != nil {
		return r
	}
	if d := ref.Digest(); d != "" {
		for _, r := range sortedRecords(f.Images) {
			pr, err := ParseReference(r.Reference)
			if err == nil && pr.Repository() == ref.Repository() && (r.Digest == d || r.Manifest == d) {
				return r
			}
		}
	}
	return nil
}

// Get returns the stored image a reference names, if any.
func (m *Images) Get(ref string) (*Record, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	f, err := m.index.snapshot()
	if err != nil {
		return nil, err
	}
	rec := lookup(f, r)
	if rec == nil {
		return nil, fmt.Errorf("image %s: %w", r, ErrNotPresent)
	}
	return rec.clone(), nil
}

// List returns the stored images, by reference.
func (m *Images) List() ([]*Record, error) {
	f, err := m.index.snapshot()
	if err != nil {
		return nil, err
	}
	out := sortedRecords(f.Images)
	for i, r := range out {
		out[i] = r.clone()
	}
	return out, nil
}

// touch marks an image used now (a task found or pulled it) and grants it
// to a namespace when asked.
func (m *Images) touch(key string, now time.Time, grant string, public bool) (*Record, error) {
	var out Record
	err := m.index.update(func(f *indexFile) error {
		r := f.Images[key]
		if r == nil {
			return fmt.Errorf("image %s: %w", key, ErrNotPresent)
		}
		if now.After(r.LastUsed) {
			r.LastUsed = now
		}
		if public {
			r.Private, r.Namespaces = false, nil
		} else if grant != "" && r.Private && !slices.Contains(r.Namespaces, grant) {
			r.Namespaces = append(r.Namespaces, grant)
			sort.Strings(r.Namespaces)
		}
		out = *r
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Pull makes an image ready in the store and returns its record.
func (m *Images) Pull(ctx context.Context, refStr string, o PullOptions) (*Record, error) {
	ref, err := ParseReference(refStr)
	if err != nil {
		return nil, err
	}
	f, err := m.index.snapshot()
	if err != nil {
		return nil, err
	}
	rec := lookup(f, ref)
	if rec != nil && !m.o.Platform.Accepts(rec.Platform) {
		return nil, &ErrPlatform{Image: rec.Reference, Offers: []Platform{rec.Platform}, Rule: m.o.Platform}
	}
	if ref.Local() || o.Policy == Never {
		if rec == nil || !rec.VisibleTo(o.Namespace) {
			why := "pullPolicy is Never"
			if ref.Local() {
				why = "localhost images are in no registry"
			}
			return nil, fmt.Errorf("image %s: %w (%s)", ref, ErrNotPresent, why)
		}
		return m.used(rec, o.Now)
	}
	// A reference by digest names bytes that cannot change: what the
	// store holds is it, whatever the policy.
	if rec != nil && (o.Policy != Always || ref.Digest() != "") {
		if rec.VisibleTo(o.Namespace) {
			return m.used(rec, o.Now)
		}
		return m.reauthorize(ctx, ref, rec, o)
	}

	// The registry client keeps this context for every request of the
	// image, the layers' included.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o.stop = cancel
	desc, err := m.o.Registry.fetchDescriptor(ctx, ref, o.Login)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Digest == desc.Digest.String() {
		if rec.VisibleTo(o.Namespace) {
			return m.used(rec, o.Now)
		}
		return m.reauthorize(ctx, ref, rec, o)
	}
	img, plat, err := selectImage(ref, desc, m.o.Platform)
	if err != nil {
		return nil, err
	}
	return m.store(ctx, ref, desc.Digest.String(), img, plat, true, false, o)
}

// reauthorize lets the registry decide whether another namespace may use
// a private image: it fetches the manifest and config with that
// namespace's login (the layers are shared), then grants it.
func (m *Images) reauthorize(ctx context.Context, ref Reference, rec *Record, o PullOptions) (*Record, error) {
	byDigest, err := ref.WithDigest(rec.Digest)
	if err != nil {
		return nil, err
	}
	desc, err := m.o.Registry.fetchDescriptor(ctx, byDigest, o.Login)
	if err != nil {
		return nil, err
	}
	img, _, err := selectImage(ref, desc, m.o.Platform)
	if err != nil {
		return nil, err
	}
	if _, err := img.RawConfigFile(); err != nil {
		return nil, fmt.Errorf("image %s: config: %w", ref, classifyRemote(err))
	}
	return m.touch(rec.Reference, o.Now, o.Namespace, o.Login == nil)
}

// store verifies and extracts an image's missing layers and records it.
func (m *Images) store(ctx context.Context, ref Reference, digest string, img v1.Image, plat Platform, compressed, local bool, o PullOptions) (*Record, error) {
	manifest, err := img.Digest()
	if err != nil {
		return nil, fmt.Errorf("image %s: manifest: %w", ref, classifyRemote(err))
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", ref, markDigest(classifyRemote(err)))
	}
	// The manifest names the config: libraries that compute ConfigName
	// from the bytes they read would check nothing.
	man, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("image %s: manifest: %w", ref, classifyRemote(err))
	}
	cfgName := man.Config.Digest
	// Checked here whatever the source: a registry's client checks it,
	// an archive's reader does not.
	if sum := sha256.Sum256(rawCfg); "sha256:"+hex.EncodeToString(sum[:]) != cfgName.String() {
		return nil, fmt.Errorf("image %s: config blob is not %s: %w", ref, cfgName, ErrDigest)
	}
	cfg, err := ParseConfig(rawCfg)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	if plat == (Platform{}) {
		plat = cfg.Platform()
	} else if cfg.OS != "" && (cfg.OS != plat.OS || cfg.Architecture != plat.Arch) {
		return nil, fmt.Errorf("image %s: the index says %s, its config %s", ref, plat, cfg.Platform())
	}
	if !m.o.Platform.Accepts(plat) {
		return nil, &ErrPlatform{Image: ref.String(), Offers: []Platform{plat}, Rule: m.o.Platform}
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("image %s: layers: %w", ref, classifyRemote(err))
	}
	if len(layers) != len(cfg.RootFS.DiffIDs) {
		return nil, fmt.Errorf("image %s: manifest has %d layers, config's rootfs.diff_ids %d", ref, len(layers), len(cfg.RootFS.DiffIDs))
	}
	chains, err := ChainIDs(cfg.RootFS.DiffIDs)
	if err != nil {
		return nil, fmt.Errorf("image %s: config: %w", ref, err)
	}
	pinned := append([]string(nil), chains...)
	if m.o.KeepBlobs {
		pinned = append(pinned, manifest.String(), cfgName.String())
		for _, l := range layers {
			if d, err := l.Digest(); err == nil {
				pinned = append(pinned, d.String())
			}
		}
	}
	pin, err := m.pin(pinned)
	if err != nil {
		return nil, err
	}
	defer pin.Release()

	rec := &Record{
		Reference: ref.String(), Digest: digest, Manifest: manifest.String(), Platform: plat,
		ConfigDigest: cfgName.String(), Config: rawCfg,
		Private: o.Login != nil, Local: local,
		Pulled: o.Now, LastUsed: o.Now,
	}
	if rec.Private {
		rec.Namespaces = []string{o.Namespace}
	}
	jobs := make([]layerJob, len(layers))
	for i, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		mt, _ := l.MediaType()
		size, _ := l.Size()
		rec.Layers = append(rec.Layers, LayerRecord{Digest: d.String(), DiffID: cfg.RootFS.DiffIDs[i], ChainID: chains[i], MediaType: string(mt), Size: size})
		jobs[i] = layerJob{index: i, chainID: chains[i], digest: d.String(), size: size,
			// A registry's blobs are checked by its client (local is
			// false only for pulls).
			src: layerSource{layer: l, diffID: cfg.RootFS.DiffIDs[i], compressed: compressed, checked: compressed && !local}}
		if i > 0 {
			jobs[i].parent = chains[i-1]
		}
	}
	if err := m.ensureLayers(ctx, rec.Reference, jobs, o.stop); err != nil {
		return nil, fmt.Errorf("image %s: %w", ref, err)
	}
	if m.o.KeepBlobs && compressed {
		raw, err := img.RawManifest()
		if err != nil {
			return nil, err
		}
		if err := m.keepBytes(manifest.String(), raw); err != nil {
			return nil, err
		}
		if err := m.keepBytes(cfgName.String(), rawCfg); err != nil {
			return nil, err
		}
	}
	var out Record
	err = m.index.update(func(f *indexFile) error {
		if old := f.Images[rec.Reference]; old != nil && old.Digest == rec.Digest {
			// Same image again: keep who may see it.
			if !rec.Private {
				old.Private, old.Namespaces = false, nil
			} else if old.Private && !slices.Contains(old.Namespaces, o.Namespace) {
				old.Namespaces = append(old.Namespaces, o.Namespace)
				sort.Strings(old.Namespaces)
			}
			rec.Private, rec.Namespaces, rec.Pulled = old.Private, old.Namespaces, old.Pulled
		}
		f.Images[rec.Reference] = rec
		out = *rec
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// pin pins layers under the index lock, so a collection either sees the
// pin or has finished before the pull looks at the store.
func (m *Images) pin(chains []string) (*Pin, error) {
	unlock, err := m.index.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	return pinLayers(filepath.Join(m.dir, "pins"), chains)
}

// Pin keeps layers through collections until released (build hosts,
// unfinished work).
func (m *Images) Pin(chainIDs ...string) (*Pin, error) { return m.pin(chainIDs) }

// layerLock serialises writers of one layer: in this process with a mutex,
// across processes with a lock file.
func (m *Images) layerLock(ctx context.Context, chainID string) (func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	mu := m.layers[chainID]
	if mu == nil {
		mu = &sync.Mutex{}
		m.layers[chainID] = mu
	}
	m.mu.Unlock()
	mu.Lock()
	f, err := os.OpenFile(filepath.Join(m.dir, "tmp", hexOf(chainID)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		mu.Unlock()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		mu.Unlock()
		return nil, err
	}
	return func() { f.Close(); mu.Unlock() }, nil
}

// layerJob is one layer of an image to make ready.
type layerJob struct {
	index                   int
	chainID, parent, digest string
	size                    int64
	src                     layerSource
}

// readyLayer is a job the fetching side finished: verified and locked
// for writing, present already, or failed.
type readyLayer struct {
	job     layerJob
	v       *verifiedLayer // nil when present already
	extract bool           // false: stored already, fetched only to keep its blob
	keep    bool           // its blob is to be kept (Options.KeepBlobs)
	unlock  func()         // set once the layer's lock is held for writing
	err     error
}

// maxFetching is how many layers of one pull are fetched, or verified and
// waiting to be written, at once (containerd also fetches three at a
// time): the next layers come in while one is written, over as many
// connections, and at most this many layers' temporary files wait on
// disk.
const maxFetching = 3

// ensureLayers makes an image's layers ready: up to maxFetching layers
// are fetched and verified at once while this goroutine writes them in
// order, each onto the one below. Each layer's lock is taken, in chain
// order, before its presence is checked and held until it is written, so
// concurrent pulls fetch a shared layer once; every image sharing a layer
// shares the layers below it in the same order, so the order cannot
// deadlock. The first failure of any layer cancels the others, and every
// layer begun is released (temporary files removed, lock let go) before
// this returns.
//
// stop, when not nil, cancels the context the layers' source reads with
// (a registry client's), so a failure ends their requests at once.
func (m *Images) ensureLayers(ctx context.Context, image string, jobs []layerJob, stop context.CancelFunc) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if stop != nil {
		defer context.AfterFunc(ctx, stop)()
	}
	var (
		failMu sync.Mutex
		failed error
	)
	// fail keeps the first failure, preferring a real one to the
	// cancellations it causes, and stops the rest of the pull.
	fail := func(j layerJob, err error) {
		failMu.Lock()
		if failed == nil || isCanceled(failed) && !isCanceled(err) {
			failed = fmt.Errorf("layer %d (%s): %w", j.index, j.digest, err)
		}
		failMu.Unlock()
		cancel()
	}
	slots := make(chan struct{}, maxFetching)
	order := make(chan chan readyLayer, len(jobs))
	var fetching sync.WaitGroup
	go func() {
		defer close(order)
		for _, j := range jobs {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			res := make(chan readyLayer, 1)
			order <- res
			r, fetch := m.claimLayer(ctx, image, j)
			if !fetch {
				res <- r
				if r.err != nil {
					fail(j, r.err)
					return
				}
				continue
			}
			fetching.Add(1)
			go func() {
				defer fetching.Done()
				// A stall fails the pull from the timer: the read it
				// stalls in ends only once the pull's requests are
				// cancelled, which fail does.
				stalled := func(err error) { fail(j, err) }
				r.v, r.err = m.fetchLayer(ctx, image, j, wantFiles{tar: r.extract, blob: r.keep}, stalled)
				if r.err != nil {
					fail(j, r.err)
				}
				res <- r
			}()
		}
	}()
	ready := 0
	for res := range order {
		r := <-res
		if ctx.Err() != nil || r.err != nil {
			// This layer, or another, failed: let this one go.
			if r.unlock != nil {
				err := r.err
				if err == nil {
					err = context.Canceled
				}
				m.o.Progress.Done(image, r.job.digest, err)
			}
			r.release()
			<-slots
			continue
		}
		if r.v != nil {
			var err error
			if r.extract {
				err = m.writeLayer(ctx, r.job, r.v)
			}
			if err == nil && r.v.blob != nil {
				err = m.keepFile(r.v.blob.Name(), r.job.digest)
			}
			m.o.Progress.Done(image, r.job.digest, err)
			if err != nil {
				fail(r.job, err)
			}
		}
		if ctx.Err() == nil {
			ready++
		}
		r.release()
		<-slots
	}
	fetching.Wait()
	failMu.Lock()
	defer failMu.Unlock()
	if failed == nil && ready < len(jobs) {
		// Only the caller's context ended, between two layers.
		return ctx.Err()
	}
	return failed
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

func (r readyLayer) release() {
	if r.v != nil {
		r.v.close()
	}
	if r.unlock != nil {
		r.unlock()
	}
}

// claimLayer locks a layer and says whether it must be fetched: not when
// it is stored already (unless its blob is to be kept), nor on failure.
func (m *Images) claimLayer(ctx context.Context, image string, j layerJob) (readyLayer, bool) {
	r := readyLayer{job: j}
	unlock, err := m.layerLock(ctx, j.chainID)
	if err != nil {
		r.err = err
		return r, false
	}
	has, err := m.o.Store.HasLayer(ctx, j.chainID)
	keep := m.o.KeepBlobs && j.src.compressed && !m.hasBlob(j.digest)
	if err != nil || has && !keep {
		unlock()
		if has {
			m.o.Progress.Skipped(image, j.digest)
		}
		r.err = err
		return r, false
	}
	r.unlock, r.extract, r.keep = unlock, !has, keep
	m.o.Progress.Start(image, j.digest, j.size)
	return r, true
}

// fetchLayer fetches and verifies a claimed layer.
//
// stalled, when not nil, is called from a timer once the layer has gone
// m.o.ProgressDeadline without a byte coming; it must end the reads.
func (m *Images) fetchLayer(ctx context.Context, image string, j layerJob, want wantFiles, stalled func(error)) (*verifiedLayer, error) {
	d := m.o.ProgressDeadline
	var watch *time.Timer
	if stalled != nil {
		watch = time.AfterFunc(d, func() { stalled(fmt.Errorf("no data for %s: %w", d, ErrStalled)) })
		defer watch.Stop()
	}
	count := func(rd io.Reader) io.Reader {
		var r io.Reader = &countingReader{r: rd, image: image, layer: j.digest, p: m.o.Progress}
		if watch != nil {
			r = &progressReader{r: r, watch: watch, d: d}
		}
		return r
	}
	return verifyLayer(ctx, j.src, filepath.Join(m.dir, "tmp"), count, want)
}

// progressReader puts a layer's progress deadline off each time bytes
// come.
type progressReader struct {
	r     io.Reader
	watch *time.Timer
	d     time.Duration
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.watch.Reset(p.d)
	}
	return n, err
}

// writeLayer extracts a verified layer onto a copy or clone of its parent.
func (m *Images) writeLayer(ctx context.Context, j layerJob, v *verifiedLayer) error {
	tr, err := v.tar()
	if err != nil {
		return err
	}
	pending, err := m.o.Store.BeginLayer(ctx, j.chainID, j.parent)
	if err != nil {
		return err
	}
	err = applyScanned(ctx, pending.Dir(), tr, v.whiteouts, ApplyOptions{Flags: m.o.Flags, Owners: m.owner, Log: m.o.Log})
	if err != nil {
		if aerr := pending.Abort(context.WithoutCancel(ctx)); aerr != nil {
			m.o.Log.Warn("discard partial layer", "layer", j.chainID, "err", aerr)
		}
		return err
	}
	return pending.Commit(ctx)
}

// PrepareRoot makes a container's root from an image it may see, and
// marks the image used.
func (m *Images) PrepareRoot(ctx context.Context, id, ref, namespace string, now time.Time) (string, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return "", err
	}
	f, err := m.index.snapshot()
	if err != nil {
		return "", err
	}
	rec := lookup(f, r)
	if rec == nil || !rec.VisibleTo(namespace) {
		return "", fmt.Errorf("image %s: %w", r, ErrNotPresent)
	}
	if len(rec.Layers) == 0 {
		return "", fmt.Errorf("image %s has no layers", r)
	}
	if _, err := m.used(rec, now); err != nil {
		return "", err
	}
	return m.o.Store.PrepareRoot(ctx, id, rec.TopChainID())
}

// touchEvery is how stale an image's mark of last use may be before
// finding it for a task or making a root from it marks it again.
const touchEvery = time.Minute

// used marks an image used now and returns its record. Marking takes
// the index's lock and an fsync: a hundred pods of one image starting at
// once queued on it. A mark under touchEvery old is kept instead; it
// keeps the image as well (collection waits for an hour unused).
func (m *Images) used(rec *Record, now time.Time) (*Record, error) {
	if last := rec.LastUsed; !now.Before(last) && now.Sub(last) < touchEvery {
		return rec.clone(), nil
	}
	return m.touch(rec.Reference, now, "", false)
}

// RemoveRoot removes a container's root.
func (m *Images) RemoveRoot(ctx context.Context, id string) error {
	return m.o.Store.RemoveRoot(ctx, id)
}

// Roots lists the container roots the store holds (PrepareRoot's), so
// their owner can find those it no longer has a container for.
func (m *Images) Roots(ctx context.Context) ([]Root, error) {
	return m.o.Store.Roots(ctx)
}

// RootsOf lists the container roots prepared from the content ref names
// (its top layer): the containers of this node made from it, which a
// removal of ref would leave unable to be made again from it. A root
// made through another reference to the same content counts too: a root
// records the content, not the name.
func (m *Images) RootsOf(ctx context.Context, ref string) ([]Root, error) {
	rec, err := m.Get(ref)
	if err != nil {
		return nil, err
	}
	roots, err := m.o.Store.Roots(ctx)
	if err != nil {
		return nil, err
	}
	top := rec.TopChainID()
	var out []Root
	for _, root := range roots {
		if root.ChainID == top {
			out = append(out, root)
		}
	}
	return out, nil
}

// Remove deletes an image from the index, then the layers nothing uses.
func (m *Images) Remove(ctx context.Context, ref string) ([]string, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	unlock, err := m.index.lock()
	if err != nil {
		return nil, err
	}
	defer unlock()
	f, err := m.index.read()
	if err != nil {
		return nil, err
	}
	rec := lookup(f, r)
	if rec == nil {
		return nil, fmt.Errorf("image %s: %w", r, ErrNotPresent)
	}
	delete(f.Images, rec.Reference)
	if err := m.index.write(f); err != nil {
		return nil, err
	}
	return m.pruneLocked(ctx, f)
}

// GCResult says what a collection removed.
type GCResult struct {
	Images []string
	Layers []string
	// Stale are leftovers of interrupted pulls and loads removed.
	Stale []string
}

// GC removes images no one used for maxUnused (DefaultMaxUnused when
// zero) before now, except those named in keep (what running containers
// use), then the layers nothing uses: no image, no pin, no container root.
func (m *Images) GC(ctx context.Context, now time.Time, maxUnused time.Duration, keep ...string) (GCResult, error) {
	if maxUnused <= 0 {
		maxUnused = DefaultMaxUnused
	}
	keepSet := map[string]bool{}
	for _, k := range keep {
		if c, err := Canonical(k); err == nil {
			keepSet[c] = true
		}
	}
	unlock, err := m.index.lock()
	if err != nil {
		return GCResult{}, err
	}
	defer unlock()
	f, err := m.index.read()
	if err != nil {
		return GCResult{}, err
	}
	var res GCResult
	for _, r := range sortedRecords(f.Images) {
		if keepSet[r.Reference] || !r.LastUsed.Add(maxUnused).Before(now) {
			continue
		}
		delete(f.Images, r.Reference)
		res.Images = append(res.Images, r.Reference)
	}
	if len(res.Images) > 0 {
		if err := m.index.write(f); err != nil {
			return res, err
		}
	}
	res.Layers, err = m.pruneLocked(ctx, f)
	if err != nil {
		return res, err
	}
	res.Stale, err = m.cleanStale(ctx, now.Add(-staleAfter))
	return res, err
}

// staleAfter is how old a temporary file or copy must be before a
// collection takes it for the leftovers of an interrupted pull or load.
const staleAfter = 24 * time.Hour

// staleCleaner is a store that leaves temporary copies behind when
// interrupted (DirStore).
type staleCleaner interface {
	CleanStale(ctx context.Context, before time.Time) ([]string, error)
}

// cleanStale removes temporary files and store copies last changed
// before a time.
func (m *Images) cleanStale(ctx context.Context, before time.Time) ([]string, error) {
	var removed []string
	tmp := filepath.Join(m.dir, "tmp")
	ents, err := os.ReadDir(tmp)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(before) || strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		p := filepath.Join(tmp, e.Name())
		if err := os.RemoveAll(p); err != nil {
			return removed, err
		}
		removed = append(removed, p)
	}
	if sc, ok := m.o.Store.(staleCleaner); ok {
		more, err := sc.CleanStale(ctx, before)
		removed = append(removed, more...)
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}

// pruneLocked removes layers nothing uses; the index lock is held. A
// layer in use by what this cannot see (a clone made elsewhere) stays.
func (m *Images) pruneLocked(ctx context.Context, f *indexFile) ([]string, error) {
	keep, err := pinnedLayers(filepath.Join(m.dir, "pins"))
	if err != nil {
		return nil, err
	}
	for _, r := range f.Images {
		for _, l := range r.Layers {
			keep[l.ChainID] = true
		}
	}
	roots, err := m.o.Store.Roots(ctx)
	if err != nil {
		return nil, err
	}
	for _, r := range roots {
		keep[r.ChainID] = true
	}
	layers, err := m.o.Store.Layers(ctx)
	if err != nil {
		return nil, err
	}
	parent := map[string]string{}
	for _, l := range layers {
		parent[l.ChainID] = l.Parent
	}
	// What a kept layer was cloned from stays too.
	for c := range keep {
		for p := parent[c]; p != "" && !keep[p]; p = parent[p] {
			keep[p] = true
		}
	}
	depth := func(c string) int {
		n := 0
		for p := parent[c]; p != ""; p = parent[p] {
			n++
		}
		return n
	}
	var drop []string
	for _, l := range layers {
		if !keep[l.ChainID] {
			drop = append(drop, l.ChainID)
		}
	}
	// Children before their parents.
	sort.Slice(drop, func(i, j int) bool {
		di, dj := depth(drop[i]), depth(drop[j])
		if di != dj {
			return di > dj
		}
		return drop[i] < drop[j]
	})
	var removed []string
	for _, c := range drop {
		err := m.o.Store.RemoveLayer(ctx, c)
		if errors.Is(err, ErrLayerInUse) {
			m.o.Log.Info("layer kept: in use", "layer", c, "err", err)
			continue
		}
		if err != nil {
			return removed, fmt.Errorf("remove layer %s: %w", c, err)
		}
		// Its lock file goes too: a pull of it would have pinned it, and
		// pins are taken under the index lock held here.
		os.Remove(filepath.Join(m.dir, "tmp", hexOf(c)+".lock"))
		removed = append(removed, c)
	}
	blobs, err := m.pruneBlobs(f, keep)
	if err != nil {
		return removed, err
	}
	if len(blobs) > 0 {
		m.o.Log.Info("kept blobs removed", "count", len(blobs))
	}
	return removed, nil
}

// Close lets go of the registry client's idle connections.
func (m *Images) Close() {
	m.o.Registry.CloseIdle()
	m.index.close()
}

// Collect runs GC at every tick (the agent ticks every ten minutes) until
// ctx ends, with now() read at each tick and keep() naming the images
// running containers use. Failures are logged and tried at the next tick.
func (m *Images) Collect(ctx context.Context, tick <-chan time.Time, now func() time.Time, keep func() []string) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			res, err := m.GC(ctx, now(), 0, keep()...)
			if err != nil {
				m.o.Log.Warn("image collection failed", "err", err)
				continue
			}
			if len(res.Images)+len(res.Layers) > 0 {
				m.o.Log.Info("image collection", "images", res.Images, "layers", len(res.Layers))
			}
		}
	}
}
