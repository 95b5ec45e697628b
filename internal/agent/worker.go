package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/agent/probe"
	"github.com/legionbsd/legion/jail"
)

// Timing the worker follows.
const (
	// MaxRestartDelay caps a container's restart backoff.
	MaxRestartDelay = 60 * time.Second
	// StableRun is how long a container must run for its failures in a
	// row to be forgotten.
	StableRun = time.Minute
	// DrainDelay keeps a ready service task serving after it leaves the
	// endpoints, so other nodes stop sending it connections first.
	DrainDelay = 2 * time.Second
	// ReportRetry is the first wait before a running task's status that
	// no manager took (no leader during an election, say) is sent again;
	// each failure doubles it, up to MaxReportRetry.
	ReportRetry    = time.Second
	MaxReportRetry = 16 * time.Second
	// ClaimPatience is how long a task's Volume claim that no manager
	// could take is asked again before the task fails: as long as a
	// write waits for a quorum, long past an election's 5 to 10 s.
	ClaimPatience = 30 * time.Second
)

// drainingMessage is a service task's status while it waits DrainDelay:
// not "draining", which a user reads as the node's drain.
const drainingMessage = "stopping: out of its service's endpoints, finishing open connections"

// worker runs one task's pod, from preparing to removal.
type worker struct {
	a      *Agent
	task   *legion.Task
	events chan jail.Event
	stop   chan struct{} // closed to ask the pod to stop
	done   chan struct{} // closed once the pod is gone
	adopt  bool          // the pod runs already: take it over
	// evict brings the message of the task's eviction under node memory
	// pressure (eviction.go), sent once: evicted is set first.
	evict   chan string
	evicted atomic.Bool
	// supervising: the pod runs and its worker follows it (supervise),
	// so it may be evicted.
	supervising atomic.Bool
	// killNow has the teardown stop the containers without their grace
	// period: an evicted task's memory is wanted back at once.
	killNow bool

	status legion.TaskStatus
	ready  bool
	// resend is the wait of the last status reported while no manager
	// took it (resendDue).
	resend Resend

	// per main container
	restarts  map[string]int
	failures  map[string]int // in a row
	started   map[string]time.Time
	exited    map[string]int    // exit code of containers that will not run again
	lastEnd   map[string]string // how each container's last run ended ("exited with 3")
	restartAt map[string]time.Time
	exhausted string // why the task failed for good, once it did
	// probeStopped: the kind of probe whose failure stopped a container,
	// until its exit is handled. Such an exit is a failure whatever its
	// code: a server that exits 0 on SIGTERM did not complete.
	probeStopped map[string]probe.Kind

	probes         chan probeEvent
	probeStop      map[string]context.CancelFunc
	probeGen       map[string]int
	containerReady map[string]bool

	// Progress reports not yet sent, and the end of their sender while
	// one runs (progress).
	progressMu    sync.Mutex
	progressQueue []legion.TaskStatus
	progressDone  chan struct{}
}

func (w *worker) container(name string) *legion.Container {
	for i := range w.task.Spec.Pod.Containers {
		if w.task.Spec.Pod.Containers[i].Name == name {
			return &w.task.Spec.Pod.Containers[i]
		}
	}
	return nil
}

func newWorker(a *Agent, task *legion.Task, adopt bool) *worker {
	return &worker{a: a, task: task, adopt: adopt,
		events: make(chan jail.Event, 64), stop: make(chan struct{}), done: make(chan struct{}), evict: make(chan string, 1),
		restarts: map[string]int{}, failures: map[string]int{}, started: map[string]time.Time{}, lastEnd: map[string]string{},
		exited: map[string]int{}, restartAt: map[string]time.Time{}, probeStopped: map[string]probe.Kind{},
		probes: make(chan probeEvent, 16), probeStop: map[string]context.CancelFunc{},
		probeGen: map[string]int{}, containerReady: map[string]bool{}}
}

// setStatus makes state and msg the worker's status.
func (w *worker) setStatus(state legion.TaskState, msg string) {
	w.status.State, w.status.Message = state, msg
	w.status.Timestamp = w.a.now()
	w.status.Ready = w.ready && state == legion.TaskRunning
	w.status.Restarts = 0
	for _, n := range w.restarts {
		w.status.Restarts += n
	}
	w.status.Containers = w.containerStatuses(state)
}

// containerStatuses is each main container's state as the task's status
// carries it (a new slice: reports queued before hold the last one). A
// container is waiting until it starts and while a restart is due,
// exited once it will not run again, else running; its message says how
// its last run ended.
func (w *worker) containerStatuses(state legion.TaskState) []legion.ContainerStatus {
	if state != legion.TaskRunning && !state.Terminal() {
		return nil // not started yet: nothing to say of each
	}
	out := make([]legion.ContainerStatus, 0, len(w.task.Spec.Pod.Containers))
	for _, c := range w.task.Spec.Pod.Containers {
		cs := legion.ContainerStatus{Name: c.Name, Restarts: w.restarts[c.Name], Message: w.lastEnd[c.Name]}
		_, due := w.restartAt[c.Name]
		_, started := w.started[c.Name]
		switch code, exited := w.exited[c.Name]; {
		case exited:
			cs.State, cs.ExitCode = "exited", &code
		case due || !started:
			cs.State = "waiting"
		case state.Terminal():
			cs.State = "exited" // stopped with its task
		default:
			cs.State = "running"
			cs.Ready = c.Probes.Readiness == nil || w.containerReady[c.Name]
		}
		out = append(out, cs)
	}
	return out
}

// report sends the worker's status as state and msg and waits for a
// manager to take it, after every progress report made before it.
func (w *worker) report(ctx context.Context, state legion.TaskState, msg string) error {
	w.setStatus(state, msg)
	w.progressed()
	return w.send(ctx)
}

// send reports the worker's status. A status no manager could take
// (ErrNoManager) is kept to be sent again (resendDue): the store would
// otherwise show the task as it was (still starting, or ready) until its
// next change, and a rolling update would wait on it for good. A refusal
// (the task deleted or given to another node) is not: the next
// assignment set stops the worker.
func (w *worker) send(ctx context.Context) error {
	calls := w.a.Manager.LeaderCalls()
	err := w.a.Manager.Report(ctx, w.task.Metadata.Namespace, w.task.Metadata.Name, w.task.Metadata.UID, w.status)
	if err != nil {
		w.a.log.Warn("reporting task status", "task", w.task.Metadata.Name, "err", err)
	}
	if !errors.Is(err, ErrNoManager) { // taken, or refused
		w.resend = Resend{}
		return err
	}
	w.resend.Refused(w.a.now(), calls)
	return err
}

// resendDue sends again a status that no manager took, once it is due
// (Resend).
func (w *worker) resendDue(ctx context.Context) {
	if w.resend.Due(w.a.now(), w.a.Manager.LeaderCalls()) {
		w.send(ctx)
	}
}

// progress reports a step on the way to running (preparing, starting)
// without waiting for a manager to take it: each report is a Raft write,
// which on a node starting a hundred pods at once took 0.1-0.7 s, and
// the pod was not made meanwhile. The steps are sent in order, one at a
// time, each of them; report waits for them before it sends.
func (w *worker) progress(ctx context.Context, state legion.TaskState, msg string) {
	w.setStatus(state, msg)
	st := w.status
	st.Manifests = maps.Clone(st.Manifests)
	st.Containers = slices.Clone(st.Containers)
	w.progressMu.Lock()
	defer w.progressMu.Unlock()
	w.progressQueue = append(w.progressQueue, st)
	if w.progressDone != nil {
		return // the sender under way sends it
	}
	done := make(chan struct{})
	w.progressDone = done
	w.a.wg.Add(1)
	go func() {
		defer w.a.wg.Done()
		defer close(done)
		for {
			w.progressMu.Lock()
			if len(w.progressQueue) == 0 {
				w.progressDone = nil
				w.progressMu.Unlock()
				return
			}
			st := w.progressQueue[0]
			w.progressQueue = w.progressQueue[1:]
			w.progressMu.Unlock()
			if err := w.a.Manager.Report(ctx, w.task.Metadata.Namespace, w.task.Metadata.Name, w.task.Metadata.UID, st); err != nil {
				w.a.log.Warn("reporting task status", "task", w.task.Metadata.Name, "err", err)
			}
		}
	}()
}

// progressed waits until every progress report made is sent.
func (w *worker) progressed() {
	w.progressMu.Lock()
	done := w.progressDone
	w.progressMu.Unlock()
	if done != nil {
		<-done
	}
}

// run drives the pod until it is asked to stop or ends for good.
func (w *worker) run(ctx context.Context) {
	defer close(w.done)
	log := w.a.log.With("task", w.task.Metadata.Namespace+"/"+w.task.Metadata.Name)
	if w.adopt && leftMidStart(w.task.Status.State) {
		// An earlier agent ended (killed, say) while making this pod: its
		// containers may be missing or never started. Every step of
		// prepare takes what is already there, so it finishes the pod.
		log.Info("finishing a pod an earlier agent left mid-way through its start")
		w.adopt = false
	}
	if !w.adopt {
		if err := w.prepare(ctx); err != nil {
			log.Warn("task failed to start", "err", err)
			// What waiting cannot fix is reported as such, so the planner
			// does not start the task again until the spec changes.
			w.status.Permanent = errors.Is(err, jail.ErrPermanent)
			if errors.Is(err, errStopped) {
				w.teardown(context.WithoutCancel(ctx), legion.TaskShutdown, "stopped before it ran")
				return
			}
			if wp := (*image.ErrPlatform)(nil); errors.As(err, &wp) {
				// No image for this node's platform: rejected with it, so
				// the planner places the owner's next task elsewhere.
				pl := w.a.Platform
				w.status.WrongPlatform = &pl
				w.teardown(context.WithoutCancel(ctx), legion.TaskRejected, err.Error())
				return
			}
			w.teardown(context.WithoutCancel(ctx), legion.TaskFailed, err.Error())
			return
		}
	} else {
		w.adopted(ctx)
	}
	state, msg := w.supervise(ctx)
	w.teardown(context.WithoutCancel(ctx), state, msg)
}

var errStopped = errors.New("stopped")

// containerFailure is err of a container (what: "container" or "init
// container") as its task's message says it. A failure that starting
// again cannot fix says its reason alone: the runtime's call and
// container id before it mean nothing to the user, who named the
// container. It still matches jail.ErrPermanent, so the planner does not
// start the task again.
func containerFailure(what, name string, err error) error {
	if errors.Is(err, jail.ErrPermanent) {
		return permanentError(what + " " + name + ": " + jail.PermanentReason(err))
	}
	return fmt.Errorf("%s %s: %w", what, name, err)
}

// permanentError is a failure that starting again cannot fix, in the
// user's words.
type permanentError string

func (e permanentError) Error() string { return string(e) }

func (e permanentError) Is(target error) bool { return target == jail.ErrPermanent }

// leftMidStart reports whether a task in this state had not been reported
// running yet: its pod may be half made.
func leftMidStart(s legion.TaskState) bool {
	switch s {
	case "", legion.TaskPending, legion.TaskAssigned, legion.TaskAccepted, legion.TaskPreparing, legion.TaskStarting:
		return true
	}
	return false
}

// prepare pulls the images, writes the secrets and configs, makes the pod
// and runs its init containers.
func (w *worker) prepare(ctx context.Context) error {
	t := w.task
	w.progress(ctx, legion.TaskPreparing, "pulling images")
	configs := map[string]*image.Config{}
	for _, c := range t.Spec.Pod.AllContainers() {
		ref := imageRef(t, c.Image)
		if _, ok := configs[c.Image]; ok {
			continue
		}
		rec, err := w.a.pull(ctx, ref, image.PullOptions{Namespace: t.Metadata.Namespace,
			Policy: pullPolicy(c.PullPolicy), Now: w.a.now(), Login: w.a.login(t, ref)})
		if err != nil {
			return fmt.Errorf("pulling %s: %w", ref, err)
		}
		cfg, err := rec.ParsedConfig()
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		configs[c.Image] = cfg
		if w.status.Manifests == nil {
			w.status.Manifests = map[string]string{}
		}
		w.status.Manifests[c.Image] = rec.Manifest
		if w.stopping() {
			return errStopped
		}
	}
	// Before anything is made: a Volume the node cannot serve fails the
	// task.
	tvs, err := w.a.taskVolumes(t)
	if err != nil {
		return err
	}
	files, err := w.a.writeFiles(t, w.a.values())
	if err != nil {
		return err
	}
	ip, err := w.a.Network.Attach(ctx, t)
	if err != nil {
		return fmt.Errorf("pod network: %w", err)
	}
	w.status.IP = ip
	w.a.setPodIP(t.Metadata.UID, ip)
	w.progress(ctx, legion.TaskStarting, "creating the pod")
	infra := jail.ContainerSpec{ID: t.Metadata.UID, Infra: true, Labels: labels(t, w.a.Node, ""),
		Annotations: map[string]string{"legion.pod.ip": ip}}
	if err := w.a.Runtime.Create(ctx, infra); err != nil && !errors.Is(err, jail.ErrExists) {
		return fmt.Errorf("creating the pod: %w", err)
	}
	if j, ok := w.a.Network.(PodJoiner); ok {
		// Nothing in the pod runs before its guard is loaded.
		w.progress(ctx, legion.TaskStarting, JoinWaitMessage)
		if err := j.Join(ctx, t, ip, true); err != nil {
			return fmt.Errorf("pod network: %w", err)
		}
	}
	if r, ok := w.a.Network.(PodResolver); ok {
		if files, err = w.a.writeResolvConf(t, files, r.Nameserver()); err != nil {
			return err
		}
	}
	roots, users := map[string]string{}, map[string]string{}
	for _, c := range t.Spec.Pod.AllContainers() {
		root, err := w.a.Images.PrepareRoot(ctx, containerID(t, c.Name), imageRef(t, c.Image), t.Metadata.Namespace, w.a.now())
		if err != nil {
			return fmt.Errorf("container %s: root: %w", c.Name, err)
		}
		roots[c.Name], users[c.Name] = root, containerUser(c, configs[c.Image])
	}
	// The roots tell who owns a new Volume; the containers need the
	// Volumes' paths.
	if len(tvs) > 0 {
		w.progress(ctx, legion.TaskStarting, "mounting volumes")
		if err := w.mountVolumes(ctx, tvs, files, users, roots); err != nil {
			return err
		}
		if w.stopping() {
			return errStopped
		}
	}
	for _, c := range t.Spec.Pod.AllContainers() {
		spec, hidden, err := containerSpec(t, w.a.Node, c, configs[c.Image], roots[c.Name], files, w.a.values(), podEnv(t, ip))
		if err != nil {
			return err
		}
		if len(hidden) > 0 {
			if spec.EnvFile, err = w.a.writeEnvFile(t, c.Name, hidden); err != nil {
				return err
			}
		}
		if err := w.a.Runtime.Create(ctx, spec); err != nil && !errors.Is(err, jail.ErrExists) {
			return containerFailure("container", c.Name, err)
		}
	}
	for _, c := range t.Spec.Pod.InitContainers {
		w.progress(ctx, legion.TaskStarting, "running init container "+c.Name)
		code, err := w.runToEnd(ctx, containerID(t, c.Name))
		if err != nil {
			return containerFailure("init container", c.Name, err)
		}
		if code != 0 {
			return fmt.Errorf("init container %s exited with %d", c.Name, code)
		}
	}
	now := w.a.now()
	w.status.Started = &now
	for _, c := range t.Spec.Pod.Containers {
		if err := w.a.Runtime.Start(ctx, containerID(t, c.Name)); err != nil {
			return containerFailure("container", c.Name, err)
		}
		w.started[c.Name] = w.a.now()
		w.startProbes(ctx, c.Name)
	}
	w.ready = w.allReady()
	w.report(ctx, legion.TaskRunning, "")
	return nil
}

// podEnv is the variables every container of a task's pod gets, at the
// pod's address ip.
func podEnv(t *legion.Task, ip string) []string {
	return []string{"LEGION_POD_IP=" + ip, "HOSTNAME=" + hostname(t)}
}

func hostname(t *legion.Task) string {
	if t.Spec.Hostname != "" {
		return t.Spec.Hostname
	}
	if t.Spec.Pod.Hostname != "" {
		return t.Spec.Pod.Hostname
	}
	return t.Metadata.Name
}

func (w *worker) stopping() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// runToEnd starts a container and waits for it to exit.
func (w *worker) runToEnd(ctx context.Context, id string) (int, error) {
	if err := w.a.Runtime.Start(ctx, id); err != nil {
		return 0, err
	}
	for {
		st, err := w.a.Runtime.Inspect(ctx, id)
		if err != nil {
			return 0, err
		}
		if st.State == jail.StateExited {
			return st.ExitCode, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-w.stop:
			return 0, errStopped
		case <-w.events:
		case <-time.After(200 * time.Millisecond): // events may come before Inspect saw the exit
		}
	}
}

// adopted takes over a pod an earlier agent started: its containers' state
// is whatever the runtime says.
func (w *worker) adopted(ctx context.Context) {
	w.status = w.task.Status
	w.a.adoptVolumes(w.task)
	// The network learns the pod's address again (so no new pod takes
	// it) and its connection, which it leaves as it is.
	ip, err := w.a.Network.Attach(ctx, w.task)
	if err != nil {
		w.a.log.Warn("adopting the pod's address", "task", w.task.Metadata.Name, "err", err)
	} else {
		w.a.setPodIP(w.task.Metadata.UID, ip)
		if j, ok := w.a.Network.(PodJoiner); ok {
			if err := j.Join(ctx, w.task, ip, false); err != nil {
				w.a.log.Warn("adopting the pod's network", "task", w.task.Metadata.Name, "err", err)
			}
		}
	}
	w.ready = w.task.Status.Ready || w.allReady()
	for _, c := range w.task.Spec.Pod.Containers {
		st, err := w.a.Runtime.Inspect(ctx, containerID(w.task, c.Name))
		if err == nil && st.State == jail.StateRunning {
			w.started[c.Name] = st.StartedAt
			w.containerReady[c.Name] = w.task.Status.Ready
			w.startProbes(ctx, c.Name)
		} else if err == nil && st.State == jail.StateExited {
			w.handleExit(ctx, c.Name, st.ExitCode)
		}
	}
	w.report(ctx, legion.TaskRunning, "adopted after an agent restart")
}

// SuperviseEvery is how often a worker looks for what is due: a
// container's restart, a report to send again or a Volume claim to ask
// again (Resend).
const SuperviseEvery = 250 * time.Millisecond

// supervisionTicks are the ticks a worker looks for what is due at,
// every SuperviseEvery (Agent.superviseTicks, when a test set it), and
// how to stop them.
func (a *Agent) supervisionTicks() (<-chan time.Time, func()) {
	if a.superviseTicks != nil {
		return a.superviseTicks, func() {}
	}
	t := time.NewTicker(SuperviseEvery)
	return t.C, t.Stop
}

// supervise follows the running pod: restarts containers by the restart
// policy, and says how the task ended.
func (w *worker) supervise(ctx context.Context) (legion.TaskState, string) {
	t := w.task
	ticks, stopTicks := w.a.supervisionTicks()
	defer stopTicks()
	defer w.stopProbes()
	w.supervising.Store(true)
	defer w.supervising.Store(false)
	for {
		if state, msg, over := w.over(); over {
			return state, msg
		}
		select {
		case <-ctx.Done():
			// The agent is shutting down: the pod keeps running, to be
			// adopted by the next agent.
			return "", ""
		case <-w.stop:
			return legion.TaskShutdown, "stopped"
		case msg := <-w.evict:
			// A failure, so the planner replaces the task as any
			// failed one.
			w.killNow = true
			return legion.TaskFailed, msg
		case ev := <-w.events:
			if ev.Type != jail.EventDied {
				continue
			}
			name := ev.Labels[LabelContainer]
			if name == "" || !isMain(t, name) {
				continue
			}
			w.handleExit(ctx, name, ev.ExitCode)
		case ev := <-w.probes:
			w.probeResult(ctx, ev)
		case <-ticks:
			w.restartDue(ctx)
			w.resendDue(ctx)
		}
	}
}

func isMain(t *legion.Task, name string) bool {
	for _, c := range t.Spec.Pod.Containers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// handleExit applies the restart policy to a main container that ended.
func (w *worker) handleExit(ctx context.Context, name string, code int) {
	if _, done := w.exited[name]; done {
		return
	}
	if _, pending := w.restartAt[name]; pending {
		return
	}
	if cancel, ok := w.probeStop[name]; ok {
		cancel() // the run the probes watched is over
		delete(w.probeStop, name)
	}
	w.containerReady[name] = false
	rp := w.task.Spec.Pod.RestartPolicy
	cond, delay, maxAttempts := legion.RestartAny, time.Second, 0
	if rp != nil {
		cond, delay, maxAttempts = rp.Condition, max(rp.Delay.D(), time.Second), rp.MaxAttempts
	}
	if w.a.now().Sub(w.started[name]) >= StableRun {
		w.failures[name] = 0
	}
	how := fmt.Sprintf("exited with %d", code)
	kind, probed := w.probeStopped[name]
	delete(w.probeStopped, name)
	if probed {
		how = fmt.Sprintf("was stopped by its failed %s probe (exited with %d)", kind, code)
	}
	w.lastEnd[name] = how
	ended := "container " + name + " " + how
	restart := cond == legion.RestartAny || cond == legion.RestartOnFailure && (code != 0 || probed)
	if restart && maxAttempts > 0 && w.restarts[name] >= maxAttempts {
		w.exited[name] = code
		w.exhausted = fmt.Sprintf("%s; restart policy exhausted after %d attempts", ended, maxAttempts)
		return
	}
	if !restart {
		w.exited[name] = code
		if probed {
			w.exhausted = ended + ", and its restart policy is none"
		}
		return
	}
	w.failures[name]++
	wait := delay
	for i := 1; i < w.failures[name] && wait < MaxRestartDelay; i++ {
		wait *= 2
	}
	wait = min(wait, MaxRestartDelay)
	w.restartAt[name] = w.a.now().Add(wait)
	w.ready = false
	w.report(ctx, legion.TaskRunning, fmt.Sprintf("%s: restarting in %s (attempt %d)",
		ended, wait.Round(time.Second), w.restarts[name]+1))
}

func (w *worker) restartDue(ctx context.Context) {
	for name, at := range w.restartAt {
		if w.a.now().Before(at) {
			continue
		}
		delete(w.restartAt, name)
		w.restarts[name]++
		if err := w.a.Runtime.Start(ctx, containerID(w.task, name)); err != nil {
			w.exited[name] = -1
			w.exhausted = fmt.Sprintf("container %s could not restart: %v", name, err)
			continue
		}
		w.started[name] = w.a.now()
		w.startProbes(ctx, name)
		w.ready = w.allReady()
		w.report(ctx, legion.TaskRunning, "")
	}
}

// over reports whether the task has ended: every main container is done
// for good.
func (w *worker) over() (legion.TaskState, string, bool) {
	if w.exhausted != "" {
		return legion.TaskFailed, w.exhausted, true
	}
	if len(w.exited) < len(w.task.Spec.Pod.Containers) {
		return "", "", false
	}
	for _, c := range w.task.Spec.Pod.Containers {
		if code := w.exited[c.Name]; code != 0 {
			w.status.ExitCode = &code
			return legion.TaskFailed, fmt.Sprintf("container %s exited with %d", c.Name, code), true
		}
	}
	zero := 0
	w.status.ExitCode = &zero
	return legion.TaskComplete, "", true
}

// teardown stops and removes the pod, keeping the containers' last output,
// and reports the final state. An empty state means the agent is shutting
// down: the pod is left running.
func (w *worker) teardown(ctx context.Context, state legion.TaskState, msg string) {
	if state == "" {
		return
	}
	t := w.task
	if state == legion.TaskShutdown && w.ready && !t.Spec.Job {
		// Leave the endpoints first, then keep serving for the drain.
		w.ready = false
		w.report(ctx, legion.TaskRunning, drainingMessage)
		select {
		case <-time.After(DrainDelay):
		case <-ctx.Done():
		}
	}
	w.ready = false
	for _, c := range t.Spec.Pod.Containers {
		grace := time.Duration(-1) // the container's own
		if w.killNow {
			grace = 0
		}
		if err := w.a.Runtime.Stop(ctx, containerID(t, c.Name), grace); err != nil && !errors.Is(err, jail.ErrNotFound) {
			w.a.log.Warn("stopping container", "task", t.Metadata.Name, "container", c.Name, "err", err)
		}
	}
	for _, c := range t.Spec.Pod.AllContainers() {
		w.a.saveOutput(ctx, t, c.Name)
	}
	w.a.setPodIP(t.Metadata.UID, "")
	// The pod's interface goes first: destroying its host end removes the
	// pair while the other end is still in the pod's jail (5.3).
	if err := w.a.Network.Detach(ctx, t); err != nil {
		w.a.log.Warn("pod network teardown", "task", t.Metadata.Name, "err", err)
	}
	if err := w.a.Runtime.Remove(ctx, t.Metadata.UID); err != nil {
		w.a.log.Warn("removing pod", "task", t.Metadata.Name, "err", err)
	}
	for _, c := range t.Spec.Pod.AllContainers() {
		w.a.Runtime.Remove(ctx, containerID(t, c.Name))
	}
	w.a.removeRoots(ctx, t)
	// Unmounted now: the Volumes are detached, and let go of once no
	// other task of the node uses them.
	if w.a.releaseVolumes(ctx, t) {
		w.a.removeTaskDir(ctx, t.Metadata.UID)
	} else {
		w.a.retryDetach(t.Metadata.UID, t)
	}
	now := w.a.now()
	w.status.Finished = &now
	if err := w.report(ctx, state, msg); err != nil {
		w.a.keepFinal(t, w.status)
	}
}
