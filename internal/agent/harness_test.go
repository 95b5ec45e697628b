package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
)

// The harness runs a real Agent against the in-memory runtime, with the
// managers, the image store and the network faked at the interfaces the
// agent consumes.

const (
	testNode = "n1"
	testIP   = "10.200.0.7"
	// waitLimit bounds every wait for the agent to act.
	waitLimit = 15 * time.Second
)

// report is one status the agent sent.
type report struct {
	namespace, name string
	st              legion.TaskStatus
}

// fakeManager hands the agent the assignment sets a test sends and keeps
// every status report.
type fakeManager struct {
	ch      chan Assignments
	mu      sync.Mutex
	reports []report
	// Volumes as the dispatcher keeps them, by namespace/name; a claim of
	// one in refuse is refused with its error.
	volumes  map[string]*legion.Volume
	refuse   map[string]error
	claims   []string // "ns/name task backend", in order
	releases []string // "ns/name"
	// onClaim, when set, runs at each claim, under mu (the test's view
	// of what was made before it).
	onClaim func(key string)
	// refuseFinal is how many reports of a terminal state to refuse, as
	// a manager without a leader would.
	refuseFinal int
	// refuseUnfinished refuses every report of any other state, kept in
	// refused, as a manager without a leader would (or with refusal, when
	// set).
	refuseUnfinished bool
	refusal          error
	refused          []legion.TaskStatus
	// beats are the calls other than reports a leader took (LeaderCalls),
	// moved by the test (beat).
	beats uint64
}

func newFakeManager() *fakeManager {
	return &fakeManager{ch: make(chan Assignments, 16), volumes: map[string]*legion.Volume{}, refuse: map[string]error{}}
}

func (m *fakeManager) ClaimVolume(ctx context.Context, ns, name, task, backend string, snapshots []string) (*legion.Volume, error) {
	key := ns + "/" + name
	m.mu.Lock()
	m.claims = append(m.claims, key+" "+task+" "+backend)
	on := m.onClaim
	err := m.refuse[key]
	v := m.volumes[key]
	if err == nil && v == nil {
		err = fmt.Errorf("volume %s not found", key)
	}
	var out *legion.Volume
	if err == nil {
		// Bound as the dispatcher binds (dispatcher.Claim): all but the
		// shared ones.
		if !v.Spec.Shared() {
			v.Status.Node, v.Status.Backend = testNode, backend
			if snapshots != nil {
				v.Status.Snapshots = slices.Clone(snapshots)
			}
		}
		c := *v
		out = &c
	}
	if on != nil {
		on(key)
	}
	m.mu.Unlock()
	return out, err
}

func (m *fakeManager) ReleaseVolume(ctx context.Context, ns, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releases = append(m.releases, ns+"/"+name)
	// Let go of as the dispatcher does (dispatcher.Release): a ZFS
	// Volume stays bound.
	if v := m.volumes[ns+"/"+name]; v != nil && v.Status.Node == testNode && v.Spec.Driver != "" && v.Spec.Driver != legion.DriverZFS {
		v.Status.Node, v.Status.Backend = "", ""
	}
	return nil
}

// addVolume keeps a Volume as the dispatcher would and returns it.
func (m *fakeManager) addVolume(v *legion.Volume) *legion.Volume {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.volumes[v.Metadata.Namespace+"/"+v.Metadata.Name] = v
	return v
}

// snapshotsOf is the snapshots a Volume's status holds, as the claims
// left them.
func (m *fakeManager) snapshotsOf(key string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.volumes[key].Status.Snapshots)
}

func (m *fakeManager) claimed() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.claims)
}

func (m *fakeManager) released() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.releases)
}

func (m *fakeManager) Assignments(ctx context.Context) (<-chan Assignments, error) { return m.ch, nil }

func (m *fakeManager) Report(ctx context.Context, namespace, name, _ string, st legion.TaskStatus) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st.State.Terminal() && m.refuseFinal > 0 {
		m.refuseFinal--
		return errors.New("no leader: the report was not taken")
	}
	if !st.State.Terminal() && m.refuseUnfinished {
		m.refused = append(m.refused, st)
		if m.refusal != nil {
			return m.refusal
		}
		return fmt.Errorf("%w: no leader: an election is in progress", ErrNoManager)
	}
	m.reports = append(m.reports, report{namespace, name, st})
	return nil
}

// LeaderCalls counts the reports taken and the beats.
func (m *fakeManager) LeaderCalls() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return uint64(len(m.reports)) + m.beats
}

// beat has a leader take a call other than a report, as a heartbeat.
func (m *fakeManager) beat() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.beats++
}

// refusedIn is how many reports of state were refused.
func (m *fakeManager) refusedIn(state legion.TaskState) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, st := range m.refused {
		if st.State == state {
			n++
		}
	}
	return n
}

// describeRefused lists the refused reports.
func (m *fakeManager) describeRefused() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return describe(m.refused)
}

func (m *fakeManager) send(as Assignments) { m.ch <- as }

// of returns the statuses reported for a task, in order.
func (m *fakeManager) of(name string) []legion.TaskStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []legion.TaskStatus
	for _, r := range m.reports {
		if r.name == name {
			out = append(out, r.st)
		}
	}
	return out
}

// await waits for a report of the task that cond accepts, and returns it.
func (m *fakeManager) await(t *testing.T, name, what string, cond func(legion.TaskStatus) bool) legion.TaskStatus {
	t.Helper()
	var st legion.TaskStatus
	waitFor(t, what, func() bool {
		for _, s := range m.of(name) {
			if cond(s) {
				st = s
				return true
			}
		}
		return false
	}, func() string { return describe(m.of(name)) })
	return st
}

// awaitAfter is await for a report that follows the n first ones.
func (m *fakeManager) awaitAfter(t *testing.T, n int, name, what string, cond func(legion.TaskStatus) bool) (legion.TaskStatus, int) {
	t.Helper()
	var st legion.TaskStatus
	idx := 0
	waitFor(t, what, func() bool {
		all := m.of(name)
		for i := n; i < len(all); i++ {
			if cond(all[i]) {
				st, idx = all[i], i
				return true
			}
		}
		return false
	}, func() string { return describe(m.of(name)) })
	return st, idx + 1
}

func describe(sts []legion.TaskStatus) string {
	var b strings.Builder
	for _, s := range sts {
		fmt.Fprintf(&b, "\n  %s ready=%v restarts=%d %q", s.State, s.Ready, s.Restarts, s.Message)
	}
	return b.String()
}

func isState(state legion.TaskState, msg string) func(legion.TaskStatus) bool {
	return func(s legion.TaskStatus) bool { return s.State == state && s.Message == msg }
}

// waitFor polls cond until it holds or the wait limit passes.
func waitFor(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; seen: %s", what, state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeImages serves image configs from memory; a reference in fail is
// refused with its error.
type fakeImages struct {
	cmd  []string // the images' Cmd
	fail map[string]error
	// user is the images' configured User; root, when set, is every
	// container's root (else a path that does not exist).
	user, root string
	os         string // the images' OS; freebsd when empty

	mu      sync.Mutex
	pulls   []string
	roots   []string
	removed []string
}

func (f *fakeImages) Pull(ctx context.Context, ref string, o image.PullOptions) (*image.Record, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pulls = append(f.pulls, ref)
	if err := f.fail[ref]; err != nil {
		return nil, err
	}
	imageOS := f.os
	if imageOS == "" {
		imageOS = "freebsd"
	}
	cfg, err := json.Marshal(image.Config{OS: imageOS, Architecture: "amd64",
		Config: image.ContainerConfig{Cmd: f.cmd, Env: []string{"PATH=/bin"}, User: f.user}})
	if err != nil {
		return nil, err
	}
	return &image.Record{Reference: ref, Manifest: "sha256:m-" + ref, Config: cfg}, nil
}

func (f *fakeImages) PrepareRoot(ctx context.Context, id, ref, ns string, now time.Time) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.roots = append(f.roots, id)
	if f.root != "" {
		return f.root, nil
	}
	return "/var/legion/roots/" + id, nil
}

func (f *fakeImages) RemoveRoot(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	return nil
}

// Roots lists the roots prepared and not removed since.
func (f *fakeImages) Roots(ctx context.Context) ([]image.Root, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []image.Root
	for _, id := range f.roots {
		if !slices.Contains(f.removed, id) {
			out = append(out, image.Root{ID: id})
		}
	}
	return out, nil
}

func (f *fakeImages) pulled() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pulls)
}

// fakeNetwork gives every pod the same address and counts detaches.
type fakeNetwork struct {
	mu       sync.Mutex
	attached []string
	detached []string
}

func (n *fakeNetwork) Attach(ctx context.Context, t *legion.Task) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.attached = append(n.attached, t.Metadata.UID)
	return testIP, nil
}

func (n *fakeNetwork) Detach(ctx context.Context, t *legion.Task) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.detached = append(n.detached, t.Metadata.UID)
	return nil
}

func (n *fakeNetwork) detaches() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.detached)
}

// recRuntime is the in-memory runtime with its creates and starts
// recorded, creates refused on request, and exec (the probes' seam)
// answered with a code the test sets per container.
type recRuntime struct {
	*jailtest.Memory

	mu        sync.Mutex
	creates   []jail.ContainerSpec
	starts    []string
	failOn    map[string]error // create of this id fails
	execCodes map[string]int
	// beforeCreate and beforeRemove, when set, run first in Create and
	// Remove (outside the lock).
	beforeCreate func(jail.ContainerSpec)
	beforeRemove func(id string)
}

func newRecRuntime(t *testing.T) *recRuntime {
	m := jailtest.NewMemory()
	t.Cleanup(m.Close)
	return &recRuntime{Memory: m, failOn: map[string]error{}, execCodes: map[string]int{}}
}

func (r *recRuntime) Create(ctx context.Context, spec jail.ContainerSpec) error {
	if r.beforeCreate != nil {
		r.beforeCreate(spec)
	}
	r.mu.Lock()
	r.creates = append(r.creates, spec)
	err := r.failOn[spec.ID]
	r.mu.Unlock()
	if err != nil {
		return err
	}
	return r.Memory.Create(ctx, spec)
}

func (r *recRuntime) Remove(ctx context.Context, id string) error {
	if r.beforeRemove != nil {
		r.beforeRemove(id)
	}
	return r.Memory.Remove(ctx, id)
}

func (r *recRuntime) Start(ctx context.Context, id string) error {
	r.mu.Lock()
	r.starts = append(r.starts, id)
	r.mu.Unlock()
	return r.Memory.Start(ctx, id)
}

func (r *recRuntime) Exec(ctx context.Context, id string, spec jail.ExecSpec) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.execCodes[id], nil
}

func (r *recRuntime) setExec(id string, code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.execCodes[id] = code
}

func (r *recRuntime) created() []jail.ContainerSpec {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.creates)
}

func (r *recRuntime) createdIDs() []string {
	var ids []string
	for _, s := range r.created() {
		ids = append(ids, s.ID)
	}
	return ids
}

func (r *recRuntime) started() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.starts)
}

// startCount is how often a container was started.
func (r *recRuntime) startCount(id string) int {
	n := 0
	for _, s := range r.started() {
		if s == id {
			n++
		}
	}
	return n
}

// fakeClock is the agent's clock, moved by the test. It starts in the
// past: probers wait for real time to reach a container's start.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Now().Add(-time.Hour)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// rig is one agent with its fakes.
type rig struct {
	agent  *Agent
	mgr    *fakeManager
	rt     *recRuntime
	images *fakeImages
	net    *fakeNetwork
	clock  *fakeClock
}

func newRig(t *testing.T) *rig {
	r := &rig{mgr: newFakeManager(), rt: newRecRuntime(t), net: &fakeNetwork{}, clock: newFakeClock(),
		images: &fakeImages{cmd: []string{"/bin/sh", "-c", "sleep 30"}}}
	r.agent = &Agent{Node: testNode, Manager: r.mgr, Runtime: r.rt, Images: r.images, Network: r.net,
		DataDir: t.TempDir(), RunDir: t.TempDir(), Now: r.clock.Now}
	return r
}

// start runs the agent until the test ends; the agent leaves its pods
// running then, which the runtime's own cleanup stops.
func (r *rig) start(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	go func() { done <- r.agent.Run(ctx) }()
}

// assign sends the tasks as the node's whole assignment set, with the
// Volumes the manager keeps.
func (r *rig) assign(values map[string][]byte, tasks ...*legion.Task) {
	r.mgr.mu.Lock()
	var vols []*legion.Volume
	for _, v := range r.mgr.volumes {
		c := *v
		vols = append(vols, &c)
	}
	r.mgr.mu.Unlock()
	r.mgr.send(Assignments{Tasks: tasks, Values: values, Volumes: vols})
}

// podGone reports whether nothing of the task is left in the runtime.
func (r *rig) podGone(uid string) bool {
	cs, err := r.rt.List(context.Background(), map[string]string{LabelTask: uid})
	return err == nil && len(cs) == 0
}

// testTask is a pending task of one main container that runs until
// stopped.
func testTask(uid string) *legion.Task {
	t := &legion.Task{}
	t.Metadata.Namespace, t.Metadata.Name, t.Metadata.UID = "default", "web-"+uid, uid
	t.Spec.Node, t.Spec.DesiredState = testNode, legion.TaskRunning
	t.Spec.Pod.Containers = []legion.Container{{Name: "main", Image: "example/web:1"}}
	t.Status.State = legion.TaskPending
	return t
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }
