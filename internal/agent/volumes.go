package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/agent/volumes"
	"github.com/legionbsd/legion/jail"
)

// VolumeStore keeps the Volumes whose data is on the node: ZFS datasets
// on a jails node, directories on a process node.
type VolumeStore interface {
	// Describe says how the node keeps a Volume, for its status.
	Describe(ns, name string) string
	// Ensure makes the Volume's data unless there, its root owned by
	// owner when made, and says where it is.
	Ensure(ctx context.Context, ref volumes.Ref, size int64, owner volumes.Owner) (string, error)
	// Resize makes a Volume's data, there already, hold its size.
	Resize(ctx context.Context, ref volumes.Ref, size int64) error
	List(ctx context.Context) ([]volumes.Local, error)
	Snapshot(ctx context.Context, ns, name, snap string) error
	Rollback(ctx context.Context, ns, name, snap string) error
	DropSnapshots(ctx context.Context, ns, name, prefix, keep string) error
	Destroy(ctx context.Context, ns, name string) error
	VolumeStreams
}

// VolumeAttacher mounts the Volumes whose data is elsewhere (NFS, iSCSI,
// plugins) for a task, recording in the task's directory what its
// teardown must undo.
type VolumeAttacher interface {
	// Serves says whether the node can mount a driver's Volumes, and why
	// not.
	Serves(d legion.VolumeDriver) (bool, string)
	Attach(ctx context.Context, taskDir string, v *legion.Volume) (string, error)
	// Detach undoes every attachment the task's directory records.
	Detach(ctx context.Context, taskDir string) error
	// Recorded reports whether the task's directory still records the
	// Volume attached.
	Recorded(taskDir, namespace, name string) (bool, error)
}

// Snapshot name prefixes the agent acts on (4.3).
const (
	updateSnapshots = "legion-update-"
	moveSnapshots   = "legion-move-"
)

// taskVolume is a pod volume backed by a Volume object.
type taskVolume struct {
	pod  string // the pod volume's name
	name string // the Volume's
	vol  *legion.Volume
}

func volumeKey(ns, name string) string { return ns + "/" + name }

func isLocal(d legion.VolumeDriver) bool { return d == "" || d == legion.DriverZFS }

// volumeNames lists the Volumes a task mounts, by pod volume.
func volumeNames(t *legion.Task) []taskVolume {
	var out []taskVolume
	for _, v := range t.Spec.Pod.Volumes {
		if v.Volume == nil && v.Claim == nil {
			continue
		}
		name := t.Spec.Volumes[v.Name]
		if name == "" && v.Volume != nil {
			name = v.Volume.Name
		}
		out = append(out, taskVolume{pod: v.Name, name: name})
	}
	return out
}

// volumeLocks keeps a starting task's claim and attach apart from a
// stopping task's detach and release of the same Volume, and knows which
// of the node's tasks use each Volume.
type volumeLocks struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
	users map[string]map[string]bool // Volume key -> task uids
	// received are copies taken in through a session that no assignment
	// set has named yet: a restore's Volume is made after its data is in.
	received map[string]bool
	objs     map[string]*legion.Volume // the latest set's Volumes
	// sizes is the size each local Volume's data was last made to hold
	// here (or refused), by a mount or a resize in use.
	sizes map[string]int64
}

func (l *volumeLocks) lock(key string) func() {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*sync.Mutex{}
	}
	m := l.locks[key]
	if m == nil {
		m = &sync.Mutex{}
		l.locks[key] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func (l *volumeLocks) use(key, task string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.users == nil {
		l.users = map[string]map[string]bool{}
	}
	if l.users[key] == nil {
		l.users[key] = map[string]bool{}
	}
	l.users[key][task] = true
}

// drop forgets the task's use, saying whether it was the last.
func (l *volumeLocks) drop(key, task string) (last bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.users[key][task] {
		return false
	}
	delete(l.users[key], task)
	if len(l.users[key]) == 0 {
		delete(l.users, key)
		return true
	}
	return false
}

func (l *volumeLocks) usedBy(key string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for t := range l.users[key] {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// sized notes the size a Volume's data was last made to hold here.
func (l *volumeLocks) sized(key string, size int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sizes == nil {
		l.sizes = map[string]int64{}
	}
	l.sizes[key] = size
}

func (l *volumeLocks) sizeOf(key string) (int64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	size, ok := l.sizes[key]
	return size, ok
}

func (l *volumeLocks) object(key string) *legion.Volume {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.objs[key]
}

func (l *volumeLocks) setObjects(vs []*legion.Volume) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.objs = map[string]*legion.Volume{}
	for _, v := range vs {
		k := volumeKey(v.Metadata.Namespace, v.Metadata.Name)
		l.objs[k] = v
		delete(l.received, k)
	}
}

func (l *volumeLocks) markReceived(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.received == nil {
		l.received = map[string]bool{}
	}
	l.received[key] = true
}

func (l *volumeLocks) isReceived(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.received[key]
}

// taskUsing names a live worker's task that mounts the Volume, if any:
// a worker exists before its task claims anything.
func (a *Agent) taskUsing(ns, name string) string {
	if users := a.vl.usedBy(volumeKey(ns, name)); len(users) > 0 {
		return users[0]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for uid, w := range a.workers {
		select {
		case <-w.done:
			continue
		default:
		}
		if w.task.Metadata.Namespace != ns {
			continue
		}
		for _, tv := range volumeNames(w.task) {
			if tv.name == name {
				return uid
			}
		}
	}
	return ""
}

// taskVolumes finds the Volume objects of a task's pod volumes and checks
// that the node can serve each: a driver it cannot mount fails the task,
// never an empty directory in its place.
func (a *Agent) taskVolumes(t *legion.Task) ([]taskVolume, error) {
	ns := t.Metadata.Namespace
	var out []taskVolume
	for _, tv := range volumeNames(t) {
		if tv.name == "" {
			return nil, fmt.Errorf("volume %s: no Volume resolved for its claim", tv.pod)
		}
		v := a.vl.object(volumeKey(ns, tv.name))
		if v == nil {
			return nil, fmt.Errorf("volume %s: Volume %s/%s not delivered to this node", tv.pod, ns, tv.name)
		}
		d := v.Spec.Driver
		switch {
		case isLocal(d) && a.Volumes == nil:
			return nil, fmt.Errorf("volume %s: Volume %s/%s: driver zfs: this node keeps no local volumes", tv.pod, ns, tv.name)
		case !isLocal(d) && a.Attacher == nil:
			return nil, fmt.Errorf("volume %s: Volume %s/%s: driver %s: this node mounts no %s volumes", tv.pod, ns, tv.name, d, d)
		case !isLocal(d):
			if ok, why := a.Attacher.Serves(d); !ok {
				return nil, fmt.Errorf("volume %s: Volume %s/%s: driver %s: %s", tv.pod, ns, tv.name, d, why)
			}
		}
		tv.vol = v
		out = append(out, tv)
	}
	return out, nil
}

// volumeOwner says who owns a new Volume's root: the pod's fsGroup, else
// the user of the first container (init containers first) that mounts it
// writable, as the runtime resolves that user in the container's root;
// root when nothing says otherwise.
func volumeOwner(pod *legion.PodSpec, podVolume string, users map[string]string, roots map[string]string) (volumes.Owner, error) {
	if pod.FSGroup != nil {
		return volumes.Owner{GID: *pod.FSGroup, GroupWritable: true}, nil
	}
	for _, c := range pod.AllContainers() {
		for _, m := range c.VolumeMounts {
			if m.Name != podVolume || m.ReadOnly {
				continue
			}
			user := users[c.Name]
			if user == "" {
				return volumes.Owner{}, nil
			}
			cred, err := jail.LookupUser(roots[c.Name], user)
			if err != nil {
				return volumes.Owner{}, fmt.Errorf("volume %s: owner from container %s: %w", podVolume, c.Name, err)
			}
			return volumes.Owner{UID: int(cred.Uid), GID: int(cred.Gid)}, nil
		}
	}
	return volumes.Owner{}, nil
}

// mountVolumes claims each of the task's Volumes, makes or attaches it and
// applies the task's snapshot step, adding each one's host path to files.
// users and roots are the containers' users (spec, else image) and roots.
func (w *worker) mountVolumes(ctx context.Context, tvs []taskVolume, files map[string]string, users, roots map[string]string) error {
	for _, tv := range tvs {
		p, err := w.mountVolume(ctx, tv, users, roots)
		if err != nil {
			return err
		}
		files["volume:"+tv.pod] = p
	}
	return nil
}

// claim claims a Volume for the worker's task. A claim no manager could
// take (ErrNoManager: no leader, during an election) is asked again when
// a refused report would go again (Resend), for up to ClaimPatience:
// failing the task for it would cost a stateful service a failed task
// and a restart for an election. A refusal (held by another node) fails
// at once.
func (w *worker) claim(ctx context.Context, ns, name, backend string, snaps []string) (*legion.Volume, error) {
	var resend Resend
	var ticks <-chan time.Time
	for start := w.a.now(); ; {
		calls := w.a.Manager.LeaderCalls()
		v, err := w.a.Manager.ClaimVolume(ctx, ns, name, w.task.Metadata.Name, backend, snaps)
		if err == nil || !errors.Is(err, ErrNoManager) || w.a.now().Sub(start) >= ClaimPatience {
			return v, err
		}
		resend.Refused(w.a.now(), calls)
		w.a.log.Info("no manager took a volume claim: asking again", "task", w.task.Metadata.Name, "volume", ns+"/"+name, "err", err)
		if ticks == nil {
			var stop func()
			ticks, stop = w.a.supervisionTicks()
			defer stop()
		}
		for !resend.Due(w.a.now(), w.a.Manager.LeaderCalls()) {
			select {
			case <-ticks:
			case <-w.stop:
				return nil, errStopped
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}
}

func (w *worker) mountVolume(ctx context.Context, tv taskVolume, users, roots map[string]string) (string, error) {
	a, t := w.a, w.task
	ns := t.Metadata.Namespace
	key := volumeKey(ns, tv.name)
	unlock := a.vl.lock(key)
	defer unlock()
	local := isLocal(tv.vol.Spec.Driver)
	backend, snaps := "", []string(nil)
	if local {
		backend, snaps = a.Volumes.Describe(ns, tv.name), a.heldSnapshots(ctx, ns, tv.name)
	}
	v, err := w.claim(ctx, ns, tv.name, backend, snaps)
	if err != nil {
		return "", fmt.Errorf("volume %s: claiming Volume %s/%s: %w", tv.pod, ns, tv.name, err)
	}
	// From here the teardown lets go of it.
	a.vl.use(key, t.Metadata.UID)
	if !local {
		p, err := a.Attacher.Attach(ctx, a.taskDir(t.Metadata.UID), v)
		if err != nil {
			return "", fmt.Errorf("volume %s: attaching Volume %s/%s: %w", tv.pod, ns, tv.name, err)
		}
		return p, nil
	}
	owner, err := volumeOwner(&t.Spec.Pod, tv.pod, users, roots)
	if err != nil {
		return "", err
	}
	size := int64(v.Spec.Size)
	p, err := a.Volumes.Ensure(ctx, volumes.Ref{Namespace: ns, Name: tv.name, UID: v.Metadata.UID}, size, owner)
	if err != nil {
		return "", fmt.Errorf("volume %s: Volume %s/%s on this node: %w", tv.pod, ns, tv.name, err)
	}
	a.vl.sized(key, size)
	if v.Status.Migration == nil {
		// The first use after a move: the move's snapshots are done with.
		if err := a.Volumes.DropSnapshots(ctx, ns, tv.name, moveSnapshots, ""); err != nil {
			a.log.Warn("dropping a finished move's snapshots", "volume", key, "err", err)
		}
	}
	if err := w.snapshotStep(ctx, ns, tv.name); err != nil {
		return "", fmt.Errorf("volume %s: Volume %s/%s: %w", tv.pod, ns, tv.name, err)
	}
	// Only the step, or a finished move's snapshots dropped, change them
	// (listing them again lists every volume of the node): the Volume's
	// status then says so, as the claim again does.
	moved := v.Status.Migration == nil && slices.ContainsFunc(snaps, func(s string) bool { return strings.HasPrefix(s, moveSnapshots) })
	if snaps != nil && (t.Spec.Snapshot != nil || moved) {
		if now := a.heldSnapshots(ctx, ns, tv.name); now != nil && !slices.Equal(now, snaps) {
			if _, err := a.Manager.ClaimVolume(ctx, ns, tv.name, t.Metadata.Name, backend, now); err != nil {
				a.log.Warn("telling the managers the volume's snapshots", "volume", key, "snapshots", now, "err", err)
			}
		}
	}
	return p, nil
}

// heldSnapshots lists the snapshots of the node's copy of a Volume, for
// its status: none (empty) when the node has no copy, nil (say nothing)
// when they cannot be listed.
func (a *Agent) heldSnapshots(ctx context.Context, ns, name string) []string {
	l, err := a.local(ctx, ns, name)
	if err != nil {
		a.log.Warn("listing the volume's snapshots", "volume", volumeKey(ns, name), "err", err)
		return nil
	}
	if l == nil || len(l.Snapshots) == 0 {
		return []string{}
	}
	return l.Snapshots
}

// snapshotStep takes or restores the task's update snapshot of a local
// Volume before its containers start (4.3).
func (w *worker) snapshotStep(ctx context.Context, ns, name string) error {
	s := w.task.Spec.Snapshot
	if s == nil {
		return nil
	}
	st := w.a.Volumes
	if s.Restore {
		err := st.Rollback(ctx, ns, name, s.Name)
		if errors.Is(err, volumes.ErrNoSnapshot) {
			w.a.log.Info("no update snapshot to roll back to: the ordinal keeps its data", "volume", volumeKey(ns, name), "snapshot", s.Name)
			return nil
		}
		if err != nil {
			return fmt.Errorf("rolling back to snapshot %s: %w", s.Name, err)
		}
		// The rollback dropped it; older updates' go too.
		if err := st.DropSnapshots(ctx, ns, name, updateSnapshots, ""); err != nil {
			return fmt.Errorf("dropping update snapshots after the rollback: %w", err)
		}
		return nil
	}
	// One taken already (a restarted task of the update) is kept.
	if err := st.Snapshot(ctx, ns, name, s.Name); err != nil {
		return fmt.Errorf("taking snapshot %s: %w", s.Name, err)
	}
	if err := st.DropSnapshots(ctx, ns, name, updateSnapshots, s.Name); err != nil {
		return fmt.Errorf("dropping older update snapshots: %w", err)
	}
	return nil
}

// local finds the node's copy of a Volume.
func (a *Agent) local(ctx context.Context, ns, name string) (*volumes.Local, error) {
	ls, err := a.Volumes.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the node's volumes: %w", err)
	}
	for i := range ls {
		if ls[i].Namespace == ns && ls[i].Name == name {
			return &ls[i], nil
		}
	}
	return nil, nil
}

// adoptVolumes counts an adopted pod's Volumes as used, so its teardown
// lets go of them.
func (a *Agent) adoptVolumes(t *legion.Task) {
	for _, tv := range volumeNames(t) {
		if tv.name != "" {
			a.vl.use(volumeKey(t.Metadata.Namespace, tv.name), t.Metadata.UID)
		}
	}
}

// releaseVolumes undoes the task's attachments and lets go of each Volume
// no other task of the node uses, saying whether its directory may go.
// A failed detach keeps the attached Volumes claimed: their devices may
// still be in use.
func (a *Agent) releaseVolumes(ctx context.Context, t *legion.Task) bool {
	ns, uid := t.Metadata.Namespace, t.Metadata.UID
	var keys []string
	for _, tv := range volumeNames(t) {
		if tv.name != "" {
			keys = append(keys, tv.name)
		}
	}
	slices.Sort(keys)
	keys = slices.Compact(keys)
	for _, name := range keys {
		defer a.vl.lock(volumeKey(ns, name))()
	}
	detached := true
	if a.Attacher != nil {
		if err := a.Attacher.Detach(ctx, a.taskDir(uid)); err != nil {
			a.log.Warn("detaching the task's volumes; they stay held and are tried again", "task", t.Metadata.Name, "err", err)
			detached = false
		}
	}
	for _, name := range keys {
		key := volumeKey(ns, name)
		if !detached {
			if v := a.vl.object(key); v == nil || !isLocal(v.Spec.Driver) {
				continue
			}
		}
		if !a.vl.drop(key, uid) {
			continue
		}
		if err := a.Manager.ReleaseVolume(ctx, ns, name); err != nil {
			a.log.Warn("releasing a volume no task of the node uses", "volume", key, "err", err)
		}
	}
	return detached
}

// detachDir undoes what a task directory's records say is attached, for
// a task whose worker is gone; it says whether the directory may go.
func (a *Agent) detachDir(ctx context.Context, uid string) bool {
	if a.Attacher == nil {
		return true
	}
	if err := a.Attacher.Detach(ctx, a.taskDir(uid)); err != nil {
		a.log.Warn("detaching a leftover task's volumes; its directory stays and is tried again", "task", uid, "err", err)
		return false
	}
	return true
}

// queueLocalCopies hands the latest assignment set's Volumes to the
// goroutine that reconciles the local copies and the node's holds, a
// newer set replacing one not yet taken.
func (a *Agent) queueLocalCopies(as Assignments) {
	select {
	case <-a.volSets:
	default:
	}
	a.volSets <- as
}

func (a *Agent) followLocalCopies(ctx context.Context) {
	_, idle := a.detaches.chans()
	var last []*legion.Volume // the latest set's
	for {
		select {
		case <-ctx.Done():
			return
		case as := <-a.volSets:
			last = as.Volumes
			a.reconcileLocalCopies(ctx, as)
			a.releaseIdle(ctx, as.Volumes)
			a.resizeInUse(ctx, as.Volumes)
		case <-idle:
			// A directory an earlier agent left was detached at last.
			a.releaseIdle(ctx, last)
		}
	}
}

// resizeInUse makes each of the node's local Volumes that a task here
// mounts hold its size once that changes (a claim resized with its
// service), rather than at the next mount. A size below what the data
// already uses is refused, saying so, and not tried again until the size
// changes; the next mount fails the same way.
func (a *Agent) resizeInUse(ctx context.Context, vols []*legion.Volume) {
	if a.Volumes == nil {
		return
	}
	for _, v := range vols {
		if v.Status.Node != a.Node || !isLocal(v.Spec.Driver) {
			continue
		}
		ns, name, size := v.Metadata.Namespace, v.Metadata.Name, int64(v.Spec.Size)
		key := volumeKey(ns, name)
		func() {
			defer a.vl.lock(key)()
			was, ok := a.vl.sizeOf(key)
			if !ok || was == size || len(a.vl.usedBy(key)) == 0 {
				return // not mounted here, or as it is: the next mount sizes it
			}
			a.vl.sized(key, size)
			if err := a.Volumes.Resize(ctx, volumes.Ref{Namespace: ns, Name: name, UID: v.Metadata.UID}, size); err != nil {
				a.log.Warn("resizing a volume in use", "volume", key, "size", size, "err", err)
				return
			}
			a.log.Info("resized a volume in use", "volume", key, "from", was, "to", size)
		}()
	}
}

// releaseIdle lets go of each attached Volume the set shows held by this
// node once nothing here uses it: no live task mounts it and no task
// directory records it attached. A teardown lets go of its task's own;
// this catches what no teardown did: a stop an earlier agent left, a
// detach of a directory an earlier agent left that succeeded only on a
// later try (detachretry.go), a release the managers did not take. Each
// set tries again.
func (a *Agent) releaseIdle(ctx context.Context, vols []*legion.Volume) {
	if a.Attacher == nil {
		return
	}
	for _, v := range vols {
		if v.Status.Node != a.Node || isLocal(v.Spec.Driver) || v.Spec.Shared() {
			continue
		}
		ns, name := v.Metadata.Namespace, v.Metadata.Name
		key := volumeKey(ns, name)
		func() {
			// The lock keeps a starting task's claim and attach apart.
			defer a.vl.lock(key)()
			if a.taskUsing(ns, name) != "" {
				return
			}
			task, err := a.attachedIn(ns, name)
			if err != nil {
				a.log.Warn("reading the tasks' volume records; the volume stays held", "volume", key, "err", err)
				return
			}
			if task != "" {
				return // its device may be in use until the sweep detaches it
			}
			a.log.Info("releasing a volume held by this node that none of its tasks uses", "volume", key)
			if err := a.Manager.ReleaseVolume(ctx, ns, name); err != nil {
				a.log.Warn("releasing a volume no task of the node uses", "volume", key, "err", err)
			}
		}()
	}
}

// attachedIn names a task whose directory still records the Volume
// attached, or "" when none does.
func (a *Agent) attachedIn(ns, name string) (string, error) {
	dirs, err := filepath.Glob(a.taskDir("*"))
	if err != nil {
		return "", err
	}
	for _, d := range dirs {
		// Unreadable records might name the Volume: it stays held
		// rather than be pulled from under a task.
		if held, err := a.Attacher.Recorded(d, ns, name); err != nil || held {
			return filepath.Base(d), err
		}
	}
	return "", nil
}

// reconcileLocalCopies destroys local copies no longer wanted here: of a
// Volume bound to another node with no move to or from this one, or of
// one a whole set no longer names (deleted). A copy a task here uses, or
// one taken in through a session and not yet named by a set, stays.
func (a *Agent) reconcileLocalCopies(ctx context.Context, as Assignments) {
	if a.Volumes == nil {
		return
	}
	locals, err := a.Volumes.List(ctx)
	if err != nil {
		a.log.Warn("listing the node's volumes", "err", err)
		return
	}
	set := map[string]*legion.Volume{}
	for _, v := range as.Volumes {
		set[volumeKey(v.Metadata.Namespace, v.Metadata.Name)] = v
	}
	complete := setComplete(as, a.Node, set)
	for _, l := range locals {
		why := a.unwanted(l, set, complete)
		if why == "" {
			continue
		}
		key := volumeKey(l.Namespace, l.Name)
		func() {
			defer a.vl.lock(key)()
			if task := a.taskUsing(l.Namespace, l.Name); task != "" || a.vl.isReceived(key) {
				return
			}
			a.log.Info("destroying the node's copy of a volume", "volume", key, "uid", l.UID, "reason", why)
			if err := a.Volumes.Destroy(ctx, l.Namespace, l.Name); err != nil {
				a.log.Warn("destroying the node's copy of a volume", "volume", key, "err", err)
			}
		}()
	}
}

// unwanted says why a local copy should go, or "" to keep it.
func (a *Agent) unwanted(l volumes.Local, set map[string]*legion.Volume, complete bool) string {
	key := volumeKey(l.Namespace, l.Name)
	v, ok := set[key]
	if !ok {
		if complete {
			return "no Volume of that name is bound to or moving to or from this node"
		}
		return ""
	}
	if l.UID == "" || v.Metadata.UID != l.UID {
		return "" // not provably the same Volume: left alone
	}
	if m := v.Status.Migration; m != nil && (m.From == a.Node || m.To == a.Node) {
		return ""
	}
	if v.Status.Node == "" || v.Status.Node == a.Node {
		return ""
	}
	return "the Volume is bound to node " + v.Status.Node
}

// setComplete says whether a set's Volumes can be trusted to name all
// the node wants, so that a Volume's absence means it is not wanted here.
// A manager from before Volumes were sent sends none, not even those the
// node's tasks mount: its silence must not destroy data. A set naming
// none is taken as such too, at the cost of keeping a stale copy until a
// set names some Volume (the migrator also drops copies itself).
func setComplete(as Assignments, node string, set map[string]*legion.Volume) bool {
	if len(set) == 0 {
		return false
	}
	for _, t := range as.Tasks {
		if t.Spec.Node != node {
			continue
		}
		for _, tv := range volumeNames(t) {
			if _, ok := set[volumeKey(t.Metadata.Namespace, tv.name)]; !ok && tv.name != "" {
				return false
			}
		}
	}
	return true
}
