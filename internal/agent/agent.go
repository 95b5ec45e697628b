package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/endpoints"
	"github.com/legionbsd/legion/jail"
)

// Network gives pods their addresses on the node.
type Network interface {
	// Attach gives the task's pod its address, the same one again for a
	// task that has one.
	Attach(ctx context.Context, task *legion.Task) (ip string, err error)
	Detach(ctx context.Context, task *legion.Task) error
}

// PodJoiner is a Network whose pods are connected once their infra
// container exists (a VNET jail's interface can only be moved into a jail
// that is there), and which may hold a new pod until its network policy
// is loaded.
type PodJoiner interface {
	// Join connects the task's pod, whose infra container is the task's
	// uid, at ip, or adopts the connection an earlier agent made. With
	// hold it returns only once the pod is guarded by its network policy.
	Join(ctx context.Context, task *legion.Task, ip string, hold bool) error
}

// PodResolver is a Network whose pods reach the node resolver at an
// address of their own, given to each container as its resolv.conf.
type PodResolver interface {
	Nameserver() string
}

// TaskDirs mounts and unmounts the memory file system a task's secrets,
// configs and tmpfs volumes live on (9: secrets are held in tmpfs).
type TaskDirs interface {
	// MountTaskDir mounts it on dir, at most size bytes (0: no limit).
	MountTaskDir(ctx context.Context, dir string, size int64) error
	// UnmountTaskDir unmounts it; a directory with nothing mounted is
	// success.
	UnmountTaskDir(ctx context.Context, dir string) error
}

// taskFilesSpace is what a task's secrets and configs may take of its
// file system, beside its tmpfs volumes.
const taskFilesSpace = 16 << 20

// taskDirSize bounds a task's file system: its files and its tmpfs
// volumes; a tmpfs volume without a size leaves it unbounded.
func taskDirSize(t *legion.Task) int64 {
	size := int64(taskFilesSpace)
	for _, v := range t.Spec.Pod.Volumes {
		if v.Tmpfs != nil {
			if v.Tmpfs.Size == 0 {
				return 0
			}
			size += int64(v.Tmpfs.Size)
		}
	}
	return size
}

// JoinWaitMessage is the task's message while a new pod waits for its
// network policy (5.6).
const JoinWaitMessage = "loading the pod's network policy"

// Agent runs one node's tasks.
type Agent struct {
	Node    string
	Manager Manager
	Runtime jail.Runtime
	Images  Images
	Network Network
	// DataDir keeps what outlives pods: the saved output of finished
	// tasks (DataDir/logs/<task uid>).
	DataDir string
	// RunDir holds each task's private files (RunDir/tasks/<task uid>):
	// secrets and configs, tmpfs volumes. It should be memory-backed and
	// must not be under DataDir, so secret values never reach the disk.
	RunDir string
	Logger *slog.Logger
	Now    func() time.Time
	// TaskDirs, when set, mounts a memory file system on each task's
	// private directory (RunDir/tasks/<uid>); without it the directory is
	// only private (mode 0700), in whatever RunDir is.
	TaskDirs TaskDirs
	// Endpoints, when set, is given every service's endpoints and the
	// network policy state (nil when none was sent) each time the
	// assignments arrive (the node's load balancing, DNS and policy).
	Endpoints func(ctx context.Context, services []*endpoints.Service, policies *endpoints.Policies)
	// Peers, when set, is given the mesh's nodes each time assignments
	// carrying them arrive.
	Peers func(ctx context.Context, peers []endpoints.Peer)
	// Routes, when set, is given every HTTP route and the Secret and
	// Config values delivered (the routes' certificates among them) each
	// time the assignments arrive.
	Routes func(ctx context.Context, routes []endpoints.Route, values map[string][]byte)
	// Volumes, when set, keeps the node's local (zfs driver) Volumes; a
	// task mounting one fails on a node without it.
	Volumes VolumeStore
	// Attacher, when set, mounts the Volumes of the other drivers it
	// serves; a task mounting one fails on a node without it.
	Attacher VolumeAttacher
	// DetachRetry is how soon a task directory whose Volumes could not be
	// detached is tried again, doubling per failure (zero:
	// DetachRetryFirst).
	DetachRetry time.Duration
	// Platform is the node's platform as its status reports it: a task
	// whose image offers nothing for it is rejected naming it
	// (wrongPlatform), which keeps the planner off such nodes.
	Platform legion.Platform
	// ImageGCEvery is how often images no task here uses are collected
	// when Images can collect; ImageGCInterval when zero.
	ImageGCEvery time.Duration
	// Memory, when set, measures the node's available memory every
	// MemoryCheckInterval; below EvictionMemoryAvailable the agent evicts
	// tasks, one at a time (eviction.go). Without it nothing is evicted.
	Memory MemoryReader
	// EvictionMemoryAvailable is the node's available memory, in bytes,
	// below which tasks are evicted: DefaultEvictionMemoryAvailable
	// (100Mi) when zero, never when negative (EvictionOff).
	EvictionMemoryAvailable int64
	// MemoryCheckEvery is how often Memory is read; MemoryCheckInterval
	// when zero.
	MemoryCheckEvery time.Duration
	// PressureChanged, when set, is told when the node comes under memory
	// pressure (true) and when that is over, for the node to report it
	// (legion.NodeStatus.MemoryPressure).
	PressureChanged func(bool)

	log     *slog.Logger
	logOnce sync.Once
	mu      sync.Mutex
	workers map[string]*worker // by task uid
	// finals are the last statuses of ended workers that no manager took
	// (by task uid): sent again at each assignment set still showing the
	// task unfinished, until one does, so a lost report cannot leave a
	// task running in the store with nothing behind it.
	finals map[string]*legion.Task
	// took are the tasks a worker of this agent took, while they are
	// assigned here: their end is that worker's to report.
	took    map[string]bool
	podIPs  map[string]string // by task uid: pods attached to the network
	vals    map[string][]byte
	wg      sync.WaitGroup
	vl      volumeLocks
	volSets chan Assignments // the latest set, for the local copies
	// detaches are the task directories to detach again (detachretry.go).
	detaches detachRetries
	// assigned are the latest set's tasks for this node: their images
	// are kept from collection.
	assigned []*legion.Task
	pulls    singleflight.Group // pulls under way (pull)
	// outputSwept is when saved output was last swept (savedoutput.go).
	outputSwept time.Time
	ev          evictionState
	// superviseTicks, when set (by tests), drives every worker's
	// supervision and claims asked again in place of its own ticker
	// (supervisionTicks). The channel is unbuffered: a second send
	// returns only once the tick before it has been handled in full.
	superviseTicks chan time.Time
}

// ImageGCInterval is how often a node collects the images no task uses
// (6.1: checked every ten minutes; the store keeps each an hour unused).
const ImageGCInterval = 10 * time.Minute

// ImageCollector is an image store that removes, at each tick, images
// unused for its grace except those keep names (image.Images).
type ImageCollector interface {
	Collect(ctx context.Context, tick <-chan time.Time, now func() time.Time, keep func() []string)
}

// imagesInUse names the images of every task assigned here and of every
// worker still running (pulling, or stopping after its task went).
func (a *Agent) imagesInUse() []string {
	a.mu.Lock()
	tasks := append([]*legion.Task(nil), a.assigned...)
	for _, w := range a.workers {
		select {
		case <-w.done:
		default:
			tasks = append(tasks, w.task)
		}
	}
	a.mu.Unlock()
	var out []string
	for _, t := range tasks {
		for _, c := range t.Spec.Pod.AllContainers() {
			out = append(out, c.Image, imageRef(t, c.Image))
		}
	}
	return out
}

// collectImages runs the store's collection until ctx ends.
func (a *Agent) collectImages(ctx context.Context, c ImageCollector) {
	every := a.ImageGCEvery
	if every <= 0 {
		every = ImageGCInterval
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	c.Collect(ctx, tick.C, a.now, a.imagesInUse)
}

// initLog sets the agent's logger once: volume sessions may be served
// before Run starts.
func (a *Agent) initLog() {
	a.logOnce.Do(func() {
		a.log = a.Logger
		if a.log == nil {
			a.log = slog.New(slog.DiscardHandler)
		}
	})
}

func (a *Agent) now() time.Time {
	if a.Now != nil {
		return a.Now()
	}
	return time.Now()
}

// PodIP is the address of a pod this agent runs, by its task's uid: what
// a port-forward may connect to on this node.
func (a *Agent) PodIP(taskUID string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ip, ok := a.podIPs[taskUID]
	return ip, ok
}

// Tasks are the tasks this agent runs now (its metrics read their
// containers' limits here).
func (a *Agent) Tasks() []*legion.Task {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]*legion.Task, 0, len(a.workers))
	for _, w := range a.workers {
		out = append(out, w.task)
	}
	return out
}

func (a *Agent) setPodIP(taskUID, ip string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.podIPs == nil {
		a.podIPs = map[string]string{}
	}
	if ip == "" {
		delete(a.podIPs, taskUID)
	} else {
		a.podIPs[taskUID] = ip
	}
}

func (a *Agent) values() map[string][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.vals
}

// Run follows the node's assignments until ctx ends. Pods keep running
// when it returns, for the next agent to adopt.
func (a *Agent) Run(ctx context.Context) error {
	a.initLog()
	a.mu.Lock()
	a.workers, a.took = map[string]*worker{}, map[string]bool{}
	a.mu.Unlock()
	a.volSets = make(chan Assignments, 1)
	evCtx, stopEvents := context.WithCancel(ctx)
	defer stopEvents()
	events, err := a.Runtime.Events(evCtx)
	if err != nil {
		return fmt.Errorf("agent: runtime events: %w", err)
	}
	existing, err := a.Runtime.List(ctx, map[string]string{LabelNode: a.Node})
	if err != nil {
		return fmt.Errorf("agent: listing the runtime's containers: %w", err)
	}
	pods := map[string]bool{}
	for _, c := range existing {
		if c.Infra {
			pods[c.Labels[LabelTask]] = true
		}
	}
	// Before any worker makes a task directory of its own.
	a.sweepTaskDirs(ctx, pods)
	asg, err := a.Manager.Assignments(ctx)
	if err != nil {
		return fmt.Errorf("agent: assignments: %w", err)
	}
	defer a.wg.Wait()
	volCtx, stopVolumes := context.WithCancel(ctx)
	defer stopVolumes()
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.followLocalCopies(volCtx) }()
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.followDetaches(volCtx) }()
	if c, ok := a.Images.(ImageCollector); ok {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.collectImages(volCtx, c) }()
	}
	switch {
	case a.Memory == nil:
		a.log.Info("node-pressure eviction off: this node has no way to measure its available memory")
	case a.evictionThreshold() < 0:
		a.log.Info("node-pressure eviction off (EvictionMemoryAvailable is negative)")
	default:
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.watchMemory(volCtx) }()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case as, ok := <-asg:
			if !ok {
				return nil
			}
			a.reconcile(ctx, as, pods)
			a.queueLocalCopies(as)
			if a.Endpoints != nil {
				a.Endpoints(ctx, as.Endpoints, as.Policies)
			}
			if a.Peers != nil && as.Peers != nil {
				a.Peers(ctx, as.Peers)
			}
			if a.Routes != nil {
				a.Routes(ctx, as.Routes, as.Values)
			}
			pods = nil // adoption happens once, against the first assignments
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			a.mu.Lock()
			w := a.workers[ev.Labels[LabelTask]]
			a.mu.Unlock()
			if w != nil {
				select {
				case w.events <- ev:
				case <-w.done:
				}
			}
		}
	}
}

// reconcile starts a worker for every task the node should run and stops
// the workers of tasks it should not. Pods found at start for tasks no
// longer assigned are removed.
func (a *Agent) reconcile(ctx context.Context, as Assignments, adoptable map[string]bool) {
	a.mu.Lock()
	a.vals = as.Values
	a.vl.setObjects(as.Volumes)
	for uid, w := range a.workers {
		select {
		case <-w.done:
			delete(a.workers, uid)
		default:
		}
	}
	want := map[string]*legion.Task{}
	a.assigned = a.assigned[:0]
	var resend []*legion.Task
	assignedUIDs := map[string]bool{}
	for _, t := range as.Tasks {
		assignedUIDs[t.Metadata.UID] = true
		if f := a.finals[t.Metadata.UID]; f != nil {
			if t.Status.State.Terminal() {
				delete(a.finals, t.Metadata.UID)
			} else {
				resend = append(resend, f)
			}
		}
		if t.Spec.Node == a.Node && !t.Status.State.Terminal() {
			a.assigned = append(a.assigned, t)
		}
		if t.Spec.Node == a.Node && t.Spec.DesiredState == legion.TaskRunning && !t.Status.State.Terminal() {
			want[t.Metadata.UID] = t
		}
	}
	for uid := range a.finals {
		if !assignedUIDs[uid] {
			delete(a.finals, uid) // deleted, or no longer this node's
		}
	}
	for uid := range a.took {
		if !assignedUIDs[uid] {
			delete(a.took, uid)
		}
	}
	a.sweepOutputLocked(assignedUIDs)
	// A task placed here and told to stop before this agent ever saw it
	// wanted running has had no worker to report its end (one that had,
	// even one that ended, said it: a set older than its report must not
	// overwrite a failure with this), and the planner waits for this
	// node's word: it would read "assigned" for good, holding its share
	// of the node. Its end is said here, once, and sent again like any
	// last status until the store shows it.
	for _, t := range as.Tasks {
		uid := t.Metadata.UID
		if t.Spec.Node != a.Node || t.Spec.Placed == nil || t.Spec.DesiredState == legion.TaskRunning || !notStarted(t.Status.State) ||
			a.took[uid] || a.workers[uid] != nil || a.finals[uid] != nil || adoptable[uid] {
			continue
		}
		st := t.Status
		now := a.now()
		st.State, st.Ready, st.Timestamp, st.Finished, st.Message = legion.TaskShutdown, false, now, &now, "stopped before it ran"
		f := &legion.Task{Header: t.Header, Status: st}
		if a.finals == nil {
			a.finals = map[string]*legion.Task{}
		}
		a.finals[uid], a.took[uid] = f, true
		resend = append(resend, f)
	}
	var start []*worker
	var lost []*legion.Task
	for uid, t := range want {
		// A running worker keeps the task it started with: its status is
		// the worker's own to report, and its goroutine reads the task.
		if _, ok := a.workers[uid]; ok {
			continue
		}
		// A task the store still shows with a status from a finished
		// worker is not run twice: only pending ones, or adoptable ones.
		if t.Status.State != "" && t.Status.State != legion.TaskPending && t.Status.State != legion.TaskAssigned && !adoptable[uid] {
			// At start (adoptable is the runtime's pods then), such a
			// task has no pod: it went with an earlier agent or the
			// node. Left as it is, the store would show it running, even
			// ready, with nothing behind it; reported lost, its slot is
			// run again.
			if adoptable != nil {
				lost = append(lost, t)
			}
			continue
		}
		w := newWorker(a, t, adoptable[uid])
		a.workers[uid], a.took[uid] = w, true
		start = append(start, w)
	}
	for uid, w := range a.workers {
		if _, ok := want[uid]; !ok && !w.stopping() {
			close(w.stop)
		}
	}
	// At start, a task told to stop that a worker had (its status says
	// so) and that has no pod was stopped by an earlier agent, which ended
	// before reporting it: nobody else would, and it would show running.
	var stopped []*legion.Task
	if adoptable != nil {
		for _, t := range as.Tasks {
			uid := t.Metadata.UID
			if t.Spec.Node != a.Node || want[uid] != nil || adoptable[uid] || t.Status.State.Terminal() ||
				t.Status.State == "" || t.Status.State == legion.TaskPending || t.Status.State == legion.TaskAssigned {
				continue
			}
			stopped = append(stopped, t)
		}
	}
	a.mu.Unlock()
	for _, t := range stopped {
		a.removeRoots(ctx, t)
		a.reportPodGone(ctx, t, legion.TaskShutdown, slog.LevelInfo,
			"stopped: its pod was gone when the node's agent started (an earlier agent ended during the stop)")
	}
	for _, t := range lost {
		a.removeRoots(ctx, t)
		a.reportPodGone(ctx, t, legion.TaskOrphaned, slog.LevelWarn,
			"its pod was gone when the node's agent started: the node or its agent restarted and the pod did not survive")
	}
	if adoptable != nil {
		keep := slices.Collect(maps.Keys(want))
		for uid := range adoptable {
			keep = append(keep, uid)
		}
		a.removeStrayRoots(ctx, keep)
	}
	for _, f := range resend {
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.reportFinal(ctx, f) }()
	}
	// At start, the pods found that no task wants any more go before a new
	// pod starts: a task replaced while the node was away (a stateful
	// ordinal) would otherwise run beside its predecessor, on the same
	// volume, and on a network that does not know the old pod's address,
	// at the same address.
	var clearing sync.WaitGroup
	byUID := map[string]*legion.Task{}
	for _, t := range as.Tasks {
		byUID[t.Metadata.UID] = t
	}
	for uid := range adoptable {
		if _, ok := want[uid]; ok {
			continue
		}
		if t := byUID[uid]; t != nil && t.Spec.Node == a.Node && !t.Status.State.Terminal() {
			// An earlier agent ended (killed, say) while stopping it:
			// finish the stop, whose report ends the task.
			a.log.Info("finishing the stop of a pod an earlier agent left", "task", t.Metadata.Namespace+"/"+t.Metadata.Name)
			w := newWorker(a, t, true)
			w.status = t.Status
			// Its Volumes are its own until the teardown lets go of them:
			// counted now, before any release looks for users.
			a.adoptVolumes(t)
			a.wg.Add(1)
			clearing.Add(1)
			go func() {
				defer a.wg.Done()
				defer clearing.Done()
				w.teardown(context.WithoutCancel(ctx), legion.TaskShutdown, "stopped")
			}()
			continue
		}
		a.log.Info("removing a pod no task wants", "task", uid)
		a.removeUnknownPod(ctx, uid)
		if a.detachDir(ctx, uid) {
			a.removeTaskDir(ctx, uid)
		} else {
			a.retryDetach(uid, nil)
		}
	}
	// An adopted pod's address is the network's again before any new pod
	// asks for one (its worker attaches it too, and logs what fails).
	for _, w := range start {
		if w.adopt {
			a.Network.Attach(ctx, w.task)
		}
	}
	for _, w := range start {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if !w.adopt {
				clearing.Wait()
			}
			w.run(ctx)
		}()
	}
}

// notStarted: a state no worker has reported, so no worker of this node
// took the task.
func notStarted(s legion.TaskState) bool {
	return s == "" || s == legion.TaskPending || s == legion.TaskAssigned
}

// reportPodGone reports a task whose pod was gone at start ended as
// state, saying msg; a report that fails is kept to be sent again.
func (a *Agent) reportPodGone(ctx context.Context, t *legion.Task, state legion.TaskState, level slog.Level, msg string) {
	st := t.Status
	st.State, st.Ready, st.Timestamp, st.Message = state, false, a.now(), msg
	a.log.Log(ctx, level, "a task's pod is gone", "task", t.Metadata.Namespace+"/"+t.Metadata.Name, "was", t.Status.State, "now", state)
	if err := a.Manager.Report(ctx, t.Metadata.Namespace, t.Metadata.Name, t.Metadata.UID, st); err != nil {
		a.log.Warn("reporting a task whose pod is gone", "task", t.Metadata.Name, "err", err)
		a.keepFinal(t, st)
	}
}

// removeRoots removes the roots of a task's containers whose pod is gone:
// an earlier agent killed between preparing a root and making its
// container leaves the root (on Linux a mount) that nothing else names.
func (a *Agent) removeRoots(ctx context.Context, t *legion.Task) {
	for _, c := range t.Spec.Pod.AllContainers() {
		if err := a.Images.RemoveRoot(ctx, containerID(t, c.Name)); err != nil {
			a.log.Debug("removing container root", "err", err)
		}
	}
}

// removeStrayRoots removes, at start, the container roots of every task
// but the tasks keep names (by UID): those this node runs and those it
// has a pod of (their roots go with their pods). An earlier agent that
// ended between preparing a root and making its container leaves a root
// that nothing else names once the task is deleted while the node is
// away (a ZFS clone, or on Linux a mount, kept for ever). A root is a
// task's when its ID is one of the task's container IDs (containerID:
// the task's UID, a dash, the container's name).
func (a *Agent) removeStrayRoots(ctx context.Context, keep []string) {
	roots, err := a.Images.Roots(ctx)
	if err != nil {
		a.log.Warn("listing container roots at start; roots of tasks gone while the node was away stay", "err", err)
		return
	}
	// A container that exists keeps its root whatever its task, as
	// removing the root under it would break it; its pod's removal
	// takes both.
	cs, err := a.Runtime.List(ctx, nil)
	if err != nil {
		a.log.Warn("listing containers at start; roots of tasks gone while the node was away stay", "err", err)
		return
	}
	exists := map[string]bool{}
	for _, c := range cs {
		exists[c.ID] = true
	}
	kept := func(id string) bool {
		return exists[id] || slices.ContainsFunc(keep, func(uid string) bool { return strings.HasPrefix(id, uid+"-") })
	}
	for _, r := range roots {
		if kept(r.ID) {
			continue
		}
		a.log.Info("removing the container root of a task this node no longer has", "root", r.ID)
		if err := a.Images.RemoveRoot(ctx, r.ID); err != nil {
			a.log.Warn("removing a stray container root", "root", r.ID, "err", err)
		}
	}
}

// removeUnknownPod removes a pod found at start that no task names: its
// containers with their roots, its network, and the pod itself.
func (a *Agent) removeUnknownPod(ctx context.Context, uid string) {
	members, _ := a.Runtime.List(ctx, map[string]string{LabelTask: uid})
	for _, c := range members {
		if c.ID == uid {
			continue
		}
		a.Runtime.Stop(ctx, c.ID, -1)
		a.Runtime.Remove(ctx, c.ID)
		if err := a.Images.RemoveRoot(ctx, c.ID); err != nil {
			a.log.Debug("removing container root", "err", err)
		}
	}
	t := &legion.Task{}
	t.Metadata.UID = uid
	if err := a.Network.Detach(ctx, t); err != nil {
		a.log.Warn("pod network teardown", "task", uid, "err", err)
	}
	a.Runtime.Remove(ctx, uid)
}

// ResolvConfKey is the files entry of a pod's resolv.conf.
const ResolvConfKey = "resolv.conf"

// writeResolvConf writes the pod's resolv.conf beside its secrets: the
// node resolver, and search names so that <svc> and <svc>.<ns> resolve
// (5.5).
func (a *Agent) writeResolvConf(t *legion.Task, files map[string]string, nameserver string) (map[string]string, error) {
	p := filepath.Join(a.RunDir, "tasks", t.Metadata.UID, ResolvConfKey)
	text := fmt.Sprintf("search %s.legion legion\nnameserver %s\noptions ndots:2\n", t.Metadata.Namespace, nameserver)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("pod resolv.conf: %w", err)
	}
	os.Chmod(p, 0o644)
	files[ResolvConfKey] = p
	return files, nil
}

// writeFiles writes the Secrets and Configs a task's containers mount as
// files into the task's private directory and makes its tmpfs volumes;
// Volumes are mounted apart (mountVolumes).
func (a *Agent) writeFiles(t *legion.Task, values map[string][]byte) (map[string]string, error) {
	dir := filepath.Join(a.RunDir, "tasks", t.Metadata.UID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if a.TaskDirs != nil {
		if err := a.TaskDirs.MountTaskDir(context.Background(), dir, taskDirSize(t)); err != nil {
			return nil, fmt.Errorf("task files: %w", err)
		}
	}
	out := map[string]string{}
	ns := t.Metadata.Namespace
	for _, c := range t.Spec.Pod.AllContainers() {
		for _, set := range []struct {
			kind legion.Kind
			refs []legion.FileRef
		}{{legion.KindSecret, c.Secrets}, {legion.KindConfig, c.Configs}} {
			for _, f := range set.refs {
				val, ok := values[ValueKey(set.kind, ns, f.Name)]
				if !ok {
					return nil, fmt.Errorf("container %s: %s %s/%s not delivered to this node", c.Name, set.kind, ns, f.Name)
				}
				p := fileName(dir, set.kind, f.Name)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					return nil, err
				}
				if err := os.WriteFile(p, val, os.FileMode(f.Mode)); err != nil {
					return nil, err
				}
				if os.Geteuid() == 0 {
					os.Chown(p, f.UID, f.GID)
				}
				os.Chmod(p, os.FileMode(f.Mode))
				out[string(set.kind)+"/"+f.Name] = p
			}
		}
	}
	for _, v := range t.Spec.Pod.Volumes {
		if v.HostPath != nil {
			// The node's own path, mounted as it is; the runtime says so
			// when it is missing.
			out["volume:"+v.Name] = v.HostPath.Path
			continue
		}
		if v.Tmpfs == nil {
			continue
		}
		p := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, err
		}
		out["volume:"+v.Name] = p
	}
	return out, nil
}

// writeEnvFile keeps a container's environment from Secrets and Configs
// in the task's private directory, where the runtime reads it at each
// start, so the values never reach the runtime's records on disk.
func (a *Agent) writeEnvFile(t *legion.Task, container string, env []string) (string, error) {
	dir := filepath.Join(a.RunDir, "tasks", t.Metadata.UID, "env")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	data, err := json.Marshal(env)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, container+".json")
	return p, os.WriteFile(p, data, 0o600)
}

// login finds the registry login a task's pull secrets hold for ref.
func (a *Agent) login(t *legion.Task, ref string) *image.Login {
	r, err := image.ParseReference(ref)
	if err != nil {
		return nil
	}
	for _, name := range t.Spec.Pod.ImagePullSecrets {
		val, ok := a.values()[ValueKey(legion.KindSecret, t.Metadata.Namespace, name)]
		if !ok {
			continue
		}
		logins, err := image.ParseDockerConfig(val)
		if err != nil {
			a.log.Warn("pull secret is not a Docker config", "secret", name, "err", err)
			continue
		}
		if l, ok := logins.For(r.Registry()); ok {
			return &l
		}
	}
	return nil
}

// keepFinal holds an ended worker's last status that no manager took,
// for reconcile to send again.
func (a *Agent) keepFinal(t *legion.Task, st legion.TaskStatus) {
	f := &legion.Task{Header: t.Header, Status: st}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.finals == nil {
		a.finals = map[string]*legion.Task{}
	}
	a.finals[t.Metadata.UID] = f
}

// reportFinal sends a kept last status again; taken, it is forgotten.
func (a *Agent) reportFinal(ctx context.Context, f *legion.Task) {
	if err := a.Manager.Report(ctx, f.Metadata.Namespace, f.Metadata.Name, f.Metadata.UID, f.Status); err != nil {
		a.log.Warn("reporting an ended task's last status again", "task", f.Metadata.Name, "err", err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.finals[f.Metadata.UID] == f {
		delete(a.finals, f.Metadata.UID)
	}
}
