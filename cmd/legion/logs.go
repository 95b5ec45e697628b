package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
)

// logsOptions are the flags of legion logs.
type logsOptions struct {
	namespace  string
	container  string
	follow     bool
	since      time.Duration
	sinceTime  string // kubectl's --since-time, RFC 3339
	timestamps bool
	tail       int // the last lines of each task's output; negative for all
	// allContainers reads every container of each task (kubectl's
	// --all-containers); prefix puts the task (and container) before
	// every line even when one is read (kubectl's --prefix).
	allContainers, prefix bool
	// selector is -l: what is read is the tasks of the services and jobs
	// whose labels match, and of the tasks whose own labels match.
	selector labels.Selector
}

// newLogsCommand is `legion logs`: a task's output, read by the agent of
// its node through any manager, live or (once the pod is gone) as saved.
func newLogsCommand() *cobra.Command {
	cli := newClusterCLI()
	var o logsOptions
	var previous bool
	var selector string
	cmd := &cobra.Command{
		Use:   "logs [-f] [--since DURATION] [--tail N] [--timestamps] TASK|SERVICE|JOB|-l SELECTOR [-c CONTAINER]",
		Short: "Print a task's output, or every task of a service or job at once",
		Long: `Logs prints the output of a task's container: stdout to standard output,
stderr to standard error. A service or job name reads every one of its
tasks placed on a node and not being shut down, all at once, each line
after the task's name ("web-1-1 | line") when there are several; with
none, the task that last ended on a node. Following (-f) a service, the
tasks it starts meanwhile (an update, a scale, a restart) join, until
interrupted, as Docker's service logs -f; following a job, its new tasks
join until it is over, and the command ends with its last task. A
finished task's output is
kept on its node until the task is deleted. A stateful service's ordinal
name (db-0, its hostname) reads that ordinal's task. Name the kind to be
sure (service/web, job/migrate, task/web-1-1). A pod with several
containers needs -c, or --all-containers, which reads each one, every line
after the task and container ("web-1-1 app | line"); --prefix puts the
task before every line even when there is one. A container its restart
policy restarts in its task goes on in the same output, so every run is
there, one after the other (--timestamps tells them apart); an earlier
task of the same slot is read by its name (legion tasks lists them).

-l SELECTOR reads the tasks of the services and jobs whose labels match
(and tasks whose own labels do), as kubectl logs -l does: the last 10
lines of each unless --tail is given; with -f, the tasks they start
meanwhile join.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if selector != "" {
				if len(args) > 0 {
					return fmt.Errorf("logs -l %s reads what its labels select: give no name with it (%s)", selector, strings.Join(args, " "))
				}
				return nil
			}
			return cobra.ExactArgs(1)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if previous {
				return errors.New("logs --previous: a task's output already holds every run of its containers, one after the other (--timestamps tells them apart); " +
					"an earlier task of the same slot is read by its name (legion tasks lists them)")
			}
			if selector != "" {
				sel, err := labels.Parse(selector)
				if err != nil {
					return fmt.Errorf("logs -l %s: %w", selector, err)
				}
				o.selector = sel
				if !cmd.Flags().Changed("tail") {
					o.tail = selectorTail
				}
				return cli.logs(cmd, "-l "+selector, o)
			}
			return cli.logs(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", legion.DefaultNamespace, "namespace of the task, service or job")
	f.StringVarP(&o.container, "container", "c", "", "container to read, when the pod has several")
	f.BoolVarP(&o.follow, "follow", "f", false, "go on printing new output until interrupted")
	f.DurationVar(&o.since, "since", 0, "only output of the last DURATION (e.g. 10m)")
	f.StringVar(&o.sinceTime, "since-time", "", "only output from this time on (RFC 3339, as 2026-12-05T10:00:00Z), as kubectl's")
	f.BoolVar(&o.timestamps, "timestamps", false, "print each line's time before it")
	f.IntVar(&o.tail, "tail", -1, "print only the last N lines of each task's output so far (all when negative; default: all, or 10 with -l)")
	f.BoolVar(&o.allContainers, "all-containers", false, "read every container of each task (init containers first), each line after the task and container")
	f.BoolVar(&o.prefix, "prefix", false, "put the task's name before every line, also when there is one task")
	f.StringVarP(&selector, "selector", "l", "", "read the tasks of the services and jobs whose labels match (and tasks whose own do), as kubectl's; the last "+strconv.Itoa(selectorTail)+" lines of each unless --tail says otherwise")
	// kubectl's --previous, refused saying where the earlier runs are
	// rather than "unknown shorthand flag".
	f.BoolVarP(&previous, "previous", "p", false, "")
	f.MarkHidden("previous")
	return cmd
}

// selectorTail is how many lines of each task logs -l prints when --tail
// is not given: kubectl's, so that a selector of many tasks answers with
// a page rather than all of their output.
const selectorTail = 10

// logsTarget reads TASK, SERVICE or JOB, optionally as kind/name, for
// logs, exec and port-forward; a Kubernetes kind is said to be what it is
// here.
func logsTarget(arg, namespace, container string) (client.Target, error) {
	t := client.Target{Namespace: namespace, Name: arg, Container: container}
	if kind, name, ok := strings.Cut(arg, "/"); ok {
		k, err := resolveKind(kind)
		if err != nil || (k != legion.KindTask && k != legion.KindService && k != legion.KindJob) {
			hint := ""
			if kk, how, ok := legion.KubernetesKind(kind); ok && (kk == legion.KindTask || kk == legion.KindService) {
				hint = "; " + how + ": " + strings.ToLower(string(kk)) + "/" + name
			}
			return t, fmt.Errorf("%s: expected a task, a service or a job (NAME, task/NAME, service/NAME or job/NAME), not a %s%s", arg, kind, hint)
		}
		t.Kind, t.Name = k, name
	}
	if t.Name == "" {
		return t, fmt.Errorf("%q: a name is required", arg)
	}
	return t, nil
}

func (c *clusterCLI) logs(cmd *cobra.Command, arg string, o logsOptions) error {
	target := client.Target{Namespace: o.namespace, Container: o.container}
	if o.selector == nil {
		var err error
		if target, err = logsTarget(arg, o.namespace, o.container); err != nil {
			return err
		}
	}
	if o.since < 0 {
		return fmt.Errorf("--since %s: expected a positive duration", o.since)
	}
	var sinceTime time.Time
	if o.sinceTime != "" {
		if o.since != 0 {
			return errors.New("--since and --since-time: give one")
		}
		var err error
		if sinceTime, err = time.Parse(time.RFC3339Nano, o.sinceTime); err != nil {
			return fmt.Errorf("--since-time %q: expected a time as RFC 3339 writes it (2026-12-05T10:00:00Z)", o.sinceTime)
		}
	}
	if o.allContainers && o.container != "" {
		return fmt.Errorf("-c %s and --all-containers: read one container, or every one", o.container)
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return err
	}
	defer cl.Close()
	// Interrupting a follow is how it ends: that is no failure.
	ctx, stop := signal.NotifyContext(ctxOf(cmd), os.Interrupt, syscall.SIGTERM)
	defer stop()
	lo := client.LogsOptions{Follow: o.follow}
	lo.Since = sinceTime
	if o.since > 0 {
		lo.Since = time.Now().Add(-o.since)
	}
	var found logSources
	if o.selector != nil {
		if found, err = selectedTasks(ctx, cl, target.Namespace, o.selector); err != nil {
			return fmt.Errorf("logs %s: %w", arg, err)
		}
		switch {
		case len(found.names) == 0 && !o.follow:
			return fmt.Errorf("logs %s: none of the tasks it selects has run on a node yet (legion tasks lists them; -f waits for them)", arg)
		case len(found.names) == 1 && !o.follow:
			// One task: read by its name, as logs TASK does.
			target.Kind, target.Name = legion.KindTask, found.names[0]
		}
	} else {
		found = logTasks(ctx, cl, target)
	}
	if (o.allContainers || o.prefix) && len(found.names) == 0 && o.selector == nil {
		// A task named (or an owner with none on a node): the task
		// itself, read by its name, so that its containers are known.
		t, err := client.GetAs[*legion.Task](ctx, cl, legion.KindTask, target.Namespace, target.Name)
		if err != nil {
			return fmt.Errorf("logs %s: --all-containers and --prefix read tasks by name, and %s is none that runs (legion tasks lists them): %w", arg, target.Name, err)
		}
		found.names = []string{t.Metadata.Name}
		found.containers = map[string][]string{t.Metadata.Name: podContainerNames(&t.Spec.Pod)}
	}
	// Following a service's or a running job's tasks, its new ones join
	// (with none, the manager picks the one that last ended, as without
	// -f).
	grows := o.follow && len(found.names) > 0 &&
		(found.owner == legion.KindService || found.owner == legion.KindJob && !jobIsOver(ctx, cl, target.Namespace, target.Name)) ||
		o.follow && o.selector != nil
	if len(found.names) < 2 && !grows && !o.allContainers && !o.prefix {
		// A task, an owner of one, or one with none to follow (the
		// manager picks the last that ended): no prefix, as before.
		p := &logPrinter{stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), timestamps: o.timestamps}
		if err := readLogs(ctx, cl, target, lo, o.tail, p.print); err != nil {
			return fmt.Errorf("logs %s: %w", arg, err)
		}
		return nil
	}
	r := &logReaders{cl: cl, arg: arg, target: target, lo: lo, tail: o.tail,
		stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr(), timestamps: o.timestamps, allContainers: o.allContainers, joins: grows}
	// The first task that fails ends the others.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, name := range found.names {
		r.start(rctx, cancel, name, found.containers[name], false)
	}
	if grows {
		// A service's tasks come and go (an update, a scale, a failure):
		// the ones it starts from now on are followed too, as Docker's
		// service logs -f does, until interrupted. A job's are followed
		// until it is over; the command then ends with its last task.
		wctx, stopWatching := context.WithCancel(rctx)
		defer stopWatching()
		if found.owner == legion.KindJob {
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				defer stopWatching()
				if err := jobOver(wctx, cl, target.Namespace, target.Name, found.version); err != nil {
					if wctx.Err() == nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "warning: logs %s: not knowing when the job ends, its new tasks are no longer followed: %v\n", arg, err)
					}
					return
				}
				// The two watches keep no order between them: the tasks
				// the job ended with are read from a listing after its end.
				last := logTasks(wctx, cl, target)
				for _, name := range last.names {
					r.start(rctx, cancel, name, last.containers[name], true)
				}
			}()
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := r.followNew(wctx, rctx, cancel, found.ofTarget, found.version); err != nil && wctx.Err() == nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: logs %s: its new tasks are no longer followed: %v\n", arg, err)
			}
		}()
	}
	r.wg.Wait()
	if len(r.errs) == 0 && r.empty > 0 && len(r.started) == 0 {
		// Not one of them had anything to read, and none joined.
		return fmt.Errorf("logs %s: none of its tasks has output yet", arg)
	}
	return errors.Join(r.errs...)
}

// logReaders reads several tasks' output at once, each line after its
// task's name.
type logReaders struct {
	cl         *client.Client
	arg        string
	target     client.Target
	lo         client.LogsOptions
	tail       int
	stdout     io.Writer
	stderr     io.Writer // also where a joined task's failure is said
	timestamps bool
	// allContainers reads each of a task's containers, not the one the
	// target names (or the pod's only one).
	allContainers bool
	// joins: the tasks that start while this follows are read as they
	// start, so one with no output yet is read if it starts.
	joins bool
	wg    sync.WaitGroup
	out   sync.Mutex // one line at a time, whole, from every task

	mu      sync.Mutex
	started map[string]bool // task/container keys being read
	ran     map[string]bool // tasks the watch saw started on a node
	errs    []error
	empty   int // reads that found nothing to read (ErrNotFound)
}

// claim marks key as read, reporting whether it was not already.
func (r *logReaders) claim(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started[key] {
		return false
	}
	if r.started == nil {
		r.started = map[string]bool{}
	}
	r.started[key] = true
	return true
}

// sawStart records that the watch saw task name started on a node.
func (r *logReaders) sawStart(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ran == nil {
		r.ran = map[string]bool{}
	}
	r.ran[name] = true
}

// noOutput releases key after its read found nothing, so that the task's
// start, when the watch sees it, reads it; it reports whether the watch
// saw that start already, while the read was under way, in which case
// the caller reads again now, as nothing else will.
func (r *logReaders) noOutput(key, name string) (again bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ran[name] {
		return true // key stays claimed for the read again
	}
	delete(r.started, key)
	r.empty++
	return false
}

// start reads task name's output unless it is read already: of each of
// containers with allContainers, else of the target's container. A task
// followed from the start that fails ends the others (cancel), unless it
// only has no output yet; one that joined later (joined) is only warned
// of, as it may have gone meanwhile.
func (r *logReaders) start(ctx context.Context, cancel context.CancelFunc, name string, containers []string, joined bool) {
	if !r.allContainers {
		r.startOne(ctx, cancel, name, r.target.Container, name+" | ", joined)
		return
	}
	for _, c := range containers {
		r.startOne(ctx, cancel, name, c, name+" "+c+" | ", joined)
	}
}

func (r *logReaders) startOne(ctx context.Context, cancel context.CancelFunc, name, container, prefix string, joined bool) {
	key := name + "/" + container
	if !r.claim(key) {
		return
	}
	r.read(ctx, cancel, name, container, prefix, joined)
}

// read reads task name's container, once claimed.
func (r *logReaders) read(ctx context.Context, cancel context.CancelFunc, name, container, prefix string, joined bool) {
	p := &logPrinter{stdout: r.stdout, stderr: r.stderr, timestamps: r.timestamps, prefix: prefix, mu: &r.out}
	t := client.Target{Namespace: r.target.Namespace, Kind: legion.KindTask, Name: name, Container: container}
	lo, tail := r.lo, r.tail
	if joined {
		lo.Since, tail = time.Time{}, -1 // a new task: all it said
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		err := readLogs(ctx, r.cl, t, lo, tail, p.print)
		if err == nil || ctx.Err() != nil {
			return
		}
		err = fmt.Errorf("logs %s, task %s: %w", r.arg, name, err)
		if joined || errors.Is(err, client.ErrNotFound) {
			if !joined && r.noOutput(name+"/"+container, name) {
				// It started while this read was answered, and its start,
				// seen meanwhile, read nothing as this read held it.
				r.read(ctx, cancel, name, container, prefix, true)
				return
			}
			// One that joined may have gone meanwhile; one with nothing
			// to read (not started yet, or ended before it ran, as one
			// whose image did not pull) says so and leaves the others be,
			// as docker service logs shows the tasks that have output.
			then := ""
			if !joined && r.joins {
				then = "; read if it starts"
			}
			r.out.Lock()
			fmt.Fprintf(r.stderr, "warning: %v%s\n", err, then)
			r.out.Unlock()
			return
		}
		r.mu.Lock()
		r.errs = append(r.errs, err)
		r.mu.Unlock()
		cancel()
	}()
}

// followNew watches the namespace's tasks from version and reads each new
// task of the target (ofTarget) once it has run on a node, until wctx
// ends; the reads go on under rctx.
func (r *logReaders) followNew(wctx, rctx context.Context, cancel context.CancelFunc, ofTarget func(*legion.Task) bool, version uint64) error {
	return watchEach(wctx, r.cl, legion.KindTask, r.target.Namespace, version, func(e client.Event) bool {
		t, ok := e.Object.(*legion.Task)
		if ok && e.Type != client.Deleted && ofTarget(t) && t.Status.Started != nil && !toldToStop(t) {
			r.sawStart(t.Metadata.Name)
			r.start(rctx, cancel, t.Metadata.Name, podContainerNames(&t.Spec.Pod), true)
		}
		return false
	})
}

// jobIsOver: job ns/name is done, or gone (what cannot be read is taken
// as running: the watch says more).
func jobIsOver(ctx context.Context, cl *client.Client, ns, name string) bool {
	o, err := cl.Get(ctx, legion.KindJob, cmp.Or(ns, legion.DefaultNamespace), name)
	if errors.Is(err, client.ErrNotFound) {
		return true
	}
	return err == nil && o.(*legion.Job).Status.State.Over()
}

// jobOver returns once job ns/name is done or deleted, watching it from
// version (before it was last read, so its end is not missed).
func jobOver(ctx context.Context, cl *client.Client, ns, name string, version uint64) error {
	return watchEach(ctx, cl, legion.KindJob, ns, version, func(e client.Event) bool {
		j, ok := e.Object.(*legion.Job)
		return ok && j.Metadata.Name == name && (e.Type == client.Deleted || j.Status.State.Over())
	})
}

// watchEach calls done with each change to the objects of kind in
// namespace ns after version, until it says so (nil) or the watch ends.
func watchEach(ctx context.Context, cl *client.Client, kind legion.Kind, ns string, version uint64, done func(client.Event) bool) error {
	w, err := cl.Watch(ctx, kind, client.ListOptions{Namespace: cmp.Or(ns, legion.DefaultNamespace)}, version)
	if err != nil {
		return err
	}
	defer w.Close()
	for {
		e, err := w.Next()
		if err != nil {
			return err
		}
		if done(e) {
			return nil
		}
	}
}

// logSources is what the service or job a logs target names (either,
// when its kind is not given) has to read: its tasks placed on a node and
// not told to stop, in name order; none for a task. Tasks that cannot be
// listed leave the choice to the manager, whose answer says what is
// wrong.
type logSources struct {
	names      []string
	containers map[string][]string // of each task named, init containers first
	version    uint64              // of the listing, where a watch for new ones starts
	owner      legion.Kind         // KindService or KindJob when the tasks are all one's
	// ofTarget says whether a task is one of the target's: the owner's,
	// or a stateful ordinal's (db-0) when no owner has the name.
	ofTarget func(*legion.Task) bool
}

// selectedTasks is what logs -l reads in namespace ns: the tasks of the
// Services and Jobs whose labels sel matches, and the tasks whose own
// labels it matches (legion.service=web), those placed on a node and not
// told to stop, in name order; ofTarget takes the tasks they start later.
// Nothing selected at all is an error.
func selectedTasks(ctx context.Context, cl *client.Client, ns string, sel labels.Selector) (logSources, error) {
	ns = cmp.Or(ns, legion.DefaultNamespace)
	owners := map[legion.Owner]bool{}
	for _, k := range []legion.Kind{legion.KindService, legion.KindJob} {
		objs, _, err := cl.List(ctx, k, client.ListOptions{Namespace: ns})
		if err != nil {
			return logSources{}, err
		}
		for _, o := range objs {
			if sel.Matches(labels.Set(o.GetMetadata().Labels)) {
				owners[legion.Owner{Kind: k, Name: o.GetMetadata().Name}] = true
			}
		}
	}
	// Listed after the owners: a task they start from here on is in the
	// watch from this version.
	objs, version, err := cl.List(ctx, legion.KindTask, client.ListOptions{Namespace: ns})
	if err != nil {
		return logSources{}, err
	}
	out := logSources{version: version, containers: map[string][]string{}, ofTarget: func(t *legion.Task) bool {
		return owners[legion.Owner{Kind: t.Spec.Owner.Kind, Name: t.Spec.Owner.Name}] || sel.Matches(labels.Set(t.Metadata.Labels))
	}}
	selected := len(owners) > 0
	for _, o := range objs {
		t := o.(*legion.Task)
		if !out.ofTarget(t) {
			continue
		}
		selected = true
		if t.Spec.Node == "" || toldToStop(t) {
			continue
		}
		out.names = append(out.names, t.Metadata.Name)
		out.containers[t.Metadata.Name] = podContainerNames(&t.Spec.Pod)
	}
	if !selected {
		return logSources{}, fmt.Errorf("no service, job or task of namespace %s has labels that match (legion get services -n %s --show-labels lists theirs)", ns, ns)
	}
	sort.Strings(out.names)
	return out, nil
}

func logTasks(ctx context.Context, cl *client.Client, target client.Target) logSources {
	if target.Kind == legion.KindTask {
		return logSources{}
	}
	objs, version, err := cl.List(ctx, legion.KindTask, client.ListOptions{Namespace: cmp.Or(target.Namespace, legion.DefaultNamespace)})
	if err != nil {
		return logSources{}
	}
	out := logSources{version: version, owner: target.Kind, containers: map[string][]string{}}
	match := func(t *legion.Task) bool {
		return t.Spec.Owner.Name == target.Name && (target.Kind == "" || t.Spec.Owner.Kind == target.Kind)
	}
	if target.Kind == "" && !slices.ContainsFunc(objs, func(o legion.Object) bool { return match(o.(*legion.Task)) }) {
		// No owner of the name: a stateful ordinal's (db-0), as the
		// manager resolves it.
		match = func(t *legion.Task) bool { return t.OfOrdinal(target.Name) }
	}
	for _, o := range objs {
		t := o.(*legion.Task)
		owner := t.Spec.Owner
		if !match(t) {
			continue
		}
		if out.owner == "" {
			out.owner = owner.Kind
		} else if out.owner != owner.Kind {
			out.owner = "" // a service and a job of one name: read as before
			out.names = nil
			break
		}
		if t.Spec.Node == "" || toldToStop(t) {
			continue
		}
		out.names = append(out.names, t.Metadata.Name)
		out.containers[t.Metadata.Name] = podContainerNames(&t.Spec.Pod)
	}
	sort.Strings(out.names)
	owner := out.owner
	out.ofTarget = func(t *legion.Task) bool { return match(t) && t.Spec.Owner.Kind == owner }
	return out
}

// toldToStop: the planner told the task to stop (an update's old task,
// one of a node that went down) before it ended by itself. A task that
// failed or completed is read even once replaced: its output says why.
func toldToStop(t *legion.Task) bool {
	switch {
	case t.Spec.DesiredState == legion.TaskRunning:
		return false
	case t.Status.State == legion.TaskFailed, t.Status.State == legion.TaskRejected, t.Status.State == legion.TaskComplete:
		return false
	}
	return true
}

// readLogs reads a target's output into fn; with tail at 0 or more, only
// the last tail lines of what it holds so far, then (following) what
// comes after them.
func readLogs(ctx context.Context, cl *client.Client, t client.Target, lo client.LogsOptions, tail int, fn func(client.LogFrame) error) error {
	if tail < 0 {
		return cl.Logs(ctx, t, lo, fn)
	}
	// The protocol has no tail: read what there is, keep its last lines.
	var frames []client.LogFrame
	now := lo
	now.Follow = false
	if err := cl.Logs(ctx, t, now, func(f client.LogFrame) error { frames = append(frames, f); return nil }); err != nil {
		return err
	}
	last, kept := lastLines(frames, tail)
	if kept.Records != nil {
		if err := fn(kept); err != nil {
			return err
		}
	}
	if !lo.Follow {
		return nil
	}
	if !last.IsZero() {
		lo.Since = last.Add(time.Nanosecond)
	}
	return cl.Logs(ctx, t, lo, fn)
}

// lastLines keeps the records of the last n lines of frames (a line ends
// at a record that is not partial), and says when the last record was.
func lastLines(frames []client.LogFrame, n int) (time.Time, client.LogFrame) {
	var all []client.LogRecord
	var out client.LogFrame
	for _, f := range frames {
		out.Task, out.Container, out.Node = f.Task, f.Container, f.Node
		all = append(all, f.Records...)
	}
	var last time.Time
	if len(all) > 0 {
		last = all[len(all)-1].Time
	}
	start, lines := len(all), 0
	for i := len(all) - 1; i >= 0; i-- {
		if !all[i].Partial {
			if lines == n {
				break
			}
			lines++
		}
		start = i
	}
	if start < len(all) {
		out.Records = all[start:]
	}
	return last, out
}

// logPrinter writes each record's text, stderr records to stderr.
type logPrinter struct {
	stdout, stderr io.Writer
	timestamps     bool
	// prefix, when set, starts every line (the task's name, when several
	// tasks print at once); lines are then written whole, under mu.
	prefix  string
	mu      *sync.Mutex
	pending map[string]*strings.Builder // a line's start, by stream
	// A record that is part of a longer line goes on in the next one:
	// the time is printed only at the start of a line of each stream.
	midLine map[string]bool
}

func (p *logPrinter) print(f client.LogFrame) error {
	if p.midLine == nil {
		p.midLine = map[string]bool{}
	}
	for _, r := range f.Records {
		w := p.stdout
		if r.Stream == "stderr" {
			w = p.stderr
		}
		var b strings.Builder
		if p.timestamps && !p.midLine[r.Stream] && !r.Time.IsZero() {
			b.WriteString(r.Time.UTC().Format(time.RFC3339Nano))
			b.WriteByte(' ')
		}
		b.WriteString(r.Text)
		if !r.Partial {
			b.WriteByte('\n')
		}
		p.midLine[r.Stream] = r.Partial
		if p.mu != nil {
			if err := p.line(w, r.Stream, b.String(), r.Partial); err != nil {
				return err
			}
			continue
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
	}
	return nil
}

// line gathers a prefixed line's records and writes it once it ends.
func (p *logPrinter) line(w io.Writer, stream, text string, partial bool) error {
	if p.pending == nil {
		p.pending = map[string]*strings.Builder{}
	}
	b := p.pending[stream]
	if b == nil {
		b = &strings.Builder{}
		b.WriteString(p.prefix)
		p.pending[stream] = b
	}
	b.WriteString(text)
	if partial {
		return nil
	}
	delete(p.pending, stream)
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err := io.WriteString(w, b.String())
	return err
}
