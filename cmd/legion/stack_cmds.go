package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
)

// stackClient is what the stack commands need of a cluster. The
// namespace "" lists every namespace; a nil selector matches everything.
type stackClient interface {
	// Apply stores objs in one apply, admitted all or none, and says
	// what it did to each, in order: client.Created, Updated or Unchanged.
	Apply(ctx context.Context, objs []legion.Object) ([]string, error)
	List(ctx context.Context, kind legion.Kind, namespace string, selector map[string]string) ([]legion.Object, error)
	Delete(ctx context.Context, kind legion.Kind, namespace, name string) error
	// FollowRollout prints a service's rollout until it is done, as
	// apply --wait does (its exit codes too).
	FollowRollout(ctx context.Context, out io.Writer, namespace, name string, timeout time.Duration) error
	// FollowJob prints a Job until it is over, as apply --wait does.
	FollowJob(ctx context.Context, out io.Writer, namespace, name string, timeout time.Duration) error
}

// stackDeps are what the stack commands take from the process, so tests
// give their own.
type stackDeps struct {
	connect func(cmd *cobra.Command) (stackClient, error)
	environ func() []string
	stdin   io.Reader
}

// addStackCommands adds `legion stack` (compose files).
func addStackCommands(root *cobra.Command) {
	root.AddCommand(newStackCommand(stackDeps{connect: connectStackClient, environ: os.Environ, stdin: os.Stdin}))
}

// connectStackClient reaches the cluster the root's --server and
// --credentials (or LEGION_SERVER and LEGION_CREDENTIALS) name, as the
// cluster commands do.
func connectStackClient(cmd *cobra.Command) (stackClient, error) {
	cl, err := newClusterCLI().connect(cmd)
	if err != nil {
		return nil, err
	}
	return closingStackClient{clusterStackClient{cl}}, nil
}

// closingStackClient lets the command close the connection it opened.
type closingStackClient struct{ clusterStackClient }

func (c closingStackClient) Close() error { return c.c.Close() }

// connectStack connects and returns what closes the connection.
func connectStack(cmd *cobra.Command, deps stackDeps) (stackClient, func(), error) {
	c, err := deps.connect(cmd)
	if err != nil {
		return nil, nil, err
	}
	done := func() {}
	if cl, ok := c.(io.Closer); ok {
		done = func() { cl.Close() }
	}
	return c, done, nil
}

func newStackCommand(deps stackDeps) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "stack",
		Short: "Deploy, convert and remove compose stacks",
	}
	cmd.AddCommand(newStackConvertCommand(deps), newStackDeployCommand(deps), newStackRmCommand(deps),
		newStackLsCommand(deps), newStackServicesCommand(deps), newStackPsCommand(deps))
	return cmd
}

// stackFlags are the flags of convert and deploy.
type stackFlags struct {
	files     []string
	namespace string
	strict    bool
	profiles  []string
}

func (f *stackFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&f.files, "compose-file", "c", nil, "compose file (repeat to merge several; - for standard input)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "namespace of the stack's objects (default: the stack's name)")
	cmd.Flags().BoolVar(&f.strict, "strict", false, "refuse any compose setting Legion does not map, rather than warn")
	cmd.Flags().StringArrayVar(&f.profiles, "profile", nil, "activate a compose profile (repeat for several; * for all): services naming profiles are deployed only when one is active")
}

// convertStack reads the compose files and converts them, printing the
// warnings to standard error.
func convertStack(cmd *cobra.Command, deps stackDeps, f stackFlags, stack string) (*compose.Result, error) {
	if len(f.files) == 0 {
		return nil, fmt.Errorf("-c FILE is required")
	}
	// compose-go logs through logrus; what matters of it comes back as
	// warnings, which are printed below.
	logrus.SetOutput(io.Discard)
	var files []compose.File
	dir := "."
	for i, name := range f.files {
		var data []byte
		var err error
		if name == "-" {
			data, err = io.ReadAll(deps.stdin)
		} else {
			data, err = os.ReadFile(name)
			if i == 0 {
				dir = filepath.Dir(name)
			}
		}
		if err != nil {
			return nil, err
		}
		files = append(files, compose.File{Name: name, Content: data})
	}
	env := map[string]string{}
	for _, kv := range deps.environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	absDir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	opts := compose.Options{
		Stack: stack, Namespace: f.namespace, Env: env, Strict: f.strict, Profiles: f.profiles,
		// Relative bind mounts are the compose file's directory's, as in
		// compose; the nodes must have the same path.
		Dir: absDir,
		// Files the compose file names are relative to its directory.
		ReadFile: func(name string) ([]byte, error) {
			if !filepath.IsAbs(name) {
				name = filepath.Join(dir, name)
			}
			return os.ReadFile(name)
		},
	}
	res, err := compose.Convert(cmd.Context(), files, opts)
	if err != nil {
		return nil, err
	}
	printComposeWarnings(cmd.ErrOrStderr(), res.Warnings)
	return res, nil
}

// printComposeWarnings says what a conversion did not map ("warning:")
// or changed on the way ("note:", a name made a DNS label).
func printComposeWarnings(w io.Writer, ws []compose.Warning) {
	for _, x := range ws {
		kind := "note:"
		if x.Unsupported {
			kind = "warning:"
		}
		fmt.Fprintln(w, kind, x)
	}
}

func newStackConvertCommand(deps stackDeps) *cobra.Command {
	var f stackFlags
	cmd := &cobra.Command{
		Use:   "convert -c FILE [-n NS] [--strict] STACK",
		Short: "Print a compose file as native Legion YAML",
		Long: `Convert writes the objects a stack deploy would apply, as multi-document
YAML that legion validate and legion apply read unchanged. Compose settings
Legion does not map are warned about on standard error (refused with --strict).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			res, err := convertStack(cmd, deps, f, args[0])
			if err != nil {
				return err
			}
			out, err := compose.Render(res.Objects)
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	f.add(cmd)
	return cmd
}

func newStackDeployCommand(deps stackDeps) *cobra.Command {
	var f stackFlags
	var prune, detach, registryAuth bool
	var resolveImage string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "deploy -c FILE [-n NS] [--prune] [--strict] [--wait] STACK",
		Short: "Deploy or update a stack from compose files",
		Long: `Deploy converts the compose files as stack convert does and applies the
objects. The namespace (default: the stack's name) is created when it does
not exist: locked when the compose networks separate services (each network
then a policy segment), allowing raw sockets when a service adds NET_RAW.
An existing namespace is left as it is. A service in deploy.mode
replicated-job or global-job is a Job: deployed again unchanged it is
left as it is, and one that has finished cannot change (delete it to run
it again). With --prune, the stack's services and jobs the files no
longer have are deleted. --wait (docker's --detach=false) follows each
service's rollout in turn, then each job until it is over.

docker stack deploy's --with-registry-auth is refused: nodes pull with the
Secrets a pod names (x-legion: {pod: {imagePullSecrets: [NAME]}}), not the
client's logins. Its --resolve-image always is what Legion does (the
leader pins every tag to a digest); changed and never are refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !detach {
				wf.wait = true
			}
			if err := wf.check(); err != nil {
				return fmt.Errorf("stack deploy: %w", err)
			}
			if registryAuth {
				return fmt.Errorf("stack deploy: --with-registry-auth: nodes pull with the Secrets a pod names, not the client's registry logins: give the service x-legion: {pod: {imagePullSecrets: [NAME]}}, NAME a Secret of the registry's credentials")
			}
			switch resolveImage {
			case "", "always":
			default:
				return fmt.Errorf("stack deploy: --resolve-image %s: the leader always resolves each tag to a digest and every task of an update runs it; only always is what Legion does", resolveImage)
			}
			stack := args[0]
			res, err := convertStack(cmd, deps, f, stack)
			if err != nil {
				return err
			}
			c, done, err := connectStack(cmd, deps)
			if err != nil {
				return err
			}
			defer done()
			ctx := cmd.Context()
			var steps []compose.Step
			// A stack deploys into its own namespace, made on first deploy;
			// one that exists is left as its admin set it.
			if namespaces, err := c.List(ctx, legion.KindNamespace, "", nil); err != nil {
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: namespaces could not be listed (%v): not creating namespace %s\n", err, res.Namespace.Metadata.Name)
			} else {
				step, ok := compose.NamespaceStep(res.Namespace, namespaces)
				if ok {
					steps = append(steps, step)
				}
				// Refused before anything is written, rather than after
				// the stack's Secrets and Volumes.
				if err := hostPathsAllowed(res, namespaces); err != nil {
					return err
				}
			}
			ns := stackNamespace(f.namespace, stack)
			current, err := stackWorkloads(ctx, c, ns, map[string]string{compose.StackLabel: stack})
			if err != nil {
				return fmt.Errorf("the stack's workloads: %w", err)
			}
			applied, err := runSteps(cmd, c, append(steps, compose.PlanDeploy(stack, res.Objects, current, prune)...))
			if err != nil {
				return err
			}
			if !prune {
				// As docker stack deploy, they are kept; unlike it, say so.
				for _, r := range compose.Left(stack, res.Objects, current) {
					kept := "it keeps running"
					if r.Kind == legion.KindJob {
						kept = "it is kept"
					}
					fmt.Fprintf(cmd.ErrOrStderr(), "note: %s/%s -n %s is in stack %s but no longer in its files: %s (--prune deletes it)\n",
						strings.ToLower(string(r.Kind)), r.Name, r.Namespace, stack, kept)
				}
			}
			// What the nodes will not do of it, and the tasks that keep
			// a Secret's or Config's old value, as apply says.
			list := func(k legion.Kind, ns string) ([]legion.Object, error) { return c.List(ctx, k, ns, nil) }
			warnApplied(cmd.ErrOrStderr(), res.Objects, list)
			warnStale(cmd.ErrOrStderr(), applied, list)
			if !wf.wait {
				return nil
			}
			// Services first (Jobs follow them in res.Objects): a service
			// waiting for a job to complete finishes its rollout after it.
			for _, o := range res.Objects {
				m := o.GetMetadata()
				var err error
				switch o.(type) {
				case *legion.Service:
					err = c.FollowRollout(ctx, cmd.OutOrStdout(), m.Namespace, m.Name, wf.timeout)
				case *legion.Job:
					err = c.FollowJob(ctx, cmd.OutOrStdout(), m.Namespace, m.Name, wf.timeout)
				}
				if err != nil {
					return err
				}
			}
			return nil
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.BoolVar(&prune, "prune", false, "delete the stack's services and jobs the file no longer has")
	wf.add(cmd)
	fl.Lookup("wait").Usage = "follow each service's rollout, then each job, in turn: exit 0 once every service's tasks run its pod and are ready and every job completed, 1 if an update pauses or rolls back or a job fails, 2 on the timeout"
	// docker stack deploy's own flags, said for what they are here.
	fl.BoolVar(&detach, "detach", true, "docker's: --detach=false is --wait")
	fl.BoolVar(&registryAuth, "with-registry-auth", false, "docker's: refused, nodes pull with the Secrets a pod names")
	fl.StringVar(&resolveImage, "resolve-image", "", "docker's: always is what the leader does; others refused")
	for _, h := range []string{"detach", "with-registry-auth", "resolve-image"} {
		fl.MarkHidden(h)
	}
	return cmd
}

func newStackRmCommand(deps stackDeps) *cobra.Command {
	return stackCommand(deps, "rm [-n NS] STACK", "Remove a stack's services, jobs, network policies, secrets and configs (volumes are kept), and its namespace once empty",
		func(cmd *cobra.Command, c stackClient, stack, ns string) error {
			var current []legion.Object
			for _, k := range compose.RemoveKinds() {
				objs, err := c.List(cmd.Context(), k, ns, map[string]string{compose.StackLabel: stack})
				if err != nil {
					return fmt.Errorf("listing the stack's %s: %w", k.Plural(), err)
				}
				current = append(current, objs...)
			}
			steps := compose.PlanRemove(stack, current)
			if len(steps) == 0 {
				return fmt.Errorf("stack %s: nothing of it in namespace %s", stack, ns)
			}
			if _, err := runSteps(cmd, c, steps); err != nil {
				return err
			}
			return removeStackNamespace(cmd, c, stack, ns)
		})
}

// hostPathsAllowed refuses a stack whose bind mounts (hostPath volumes)
// its namespace, as it is or as deploy would create it, does not allow.
func hostPathsAllowed(res *compose.Result, namespaces []legion.Object) error {
	ns := res.Namespace
	for _, o := range namespaces {
		if n, ok := o.(*legion.Namespace); ok && n.Metadata.Name == ns.Metadata.Name {
			ns = n
		}
	}
	if slices.Contains(ns.Spec.Security.Allow, legion.AllowHostPath) {
		return nil
	}
	var users []string
	for _, o := range res.Objects {
		if pod := legion.PodOf(o); pod != nil && slices.ContainsFunc(pod.Volumes, func(v legion.PodVolume) bool { return v.HostPath != nil }) {
			users = append(users, o.GetMetadata().Name)
		}
	}
	if len(users) == 0 {
		return nil
	}
	return fmt.Errorf("the bind mounts of %s (hostPath volumes) are not allowed in namespace %s: a cluster admin may add hostPath to its spec.security.allow, or deploy into a namespace that allows it (-n)",
		strings.Join(users, ", "), ns.Metadata.Name)
}

// removeStackNamespace deletes the namespace stack deploy made for the
// stack (it carries the stack's label) once nothing but tasks is left in
// it: the kept Volumes, or anything else put there, keep it, and one the
// stack did not make is never deleted. Tasks are left out: the removed
// Services' tasks are stopping, and go with them.
func removeStackNamespace(cmd *cobra.Command, c stackClient, stack, ns string) error {
	ctx := cmd.Context()
	namespaces, err := c.List(ctx, legion.KindNamespace, "", nil)
	if err != nil {
		return fmt.Errorf("listing namespaces: %w", err)
	}
	var mine legion.Object
	for _, o := range namespaces {
		if o.GetMetadata().Name == ns {
			mine = o
		}
	}
	if mine == nil {
		return nil
	}
	if !compose.InStack(mine, stack) {
		fmt.Fprintf(cmd.OutOrStdout(), "namespace/%s kept: stack %s did not create it\n", ns, stack)
		return nil
	}
	left, err := namespaceHolds(ns, func(k legion.Kind) ([]legion.Object, error) { return c.List(ctx, k, ns, nil) })
	if err != nil {
		return err
	}
	if left != "" {
		fmt.Fprintf(cmd.OutOrStdout(), "namespace/%s kept: it still holds %s\n", ns, left)
		return nil
	}
	_, err = runSteps(cmd, c, []compose.Step{{Op: compose.OpDelete, Kind: legion.KindNamespace, Name: ns}})
	return err
}

// namespaceHolds says what objects namespace ns holds, tasks left out
// (they go with their owners), as "service/web, volume/db and 2 more";
// empty when it holds none. list lists one kind in it.
func namespaceHolds(ns string, list func(legion.Kind) ([]legion.Object, error)) (string, error) {
	var left []string
	for _, k := range legion.Kinds() {
		if !k.Namespaced() || k == legion.KindTask {
			continue
		}
		objs, err := list(k)
		if err != nil {
			return "", fmt.Errorf("listing the %s left in namespace %s: %w", k.Plural(), ns, err)
		}
		for _, o := range objs {
			left = append(left, strings.ToLower(string(k))+"/"+o.GetMetadata().Name)
		}
	}
	const shown = 3
	more := ""
	if len(left) > shown {
		more = fmt.Sprintf(" and %d more", len(left)-shown)
		left = left[:shown]
	}
	return strings.Join(left, ", ") + more, nil
}

func newStackPsCommand(deps stackDeps) *cobra.Command {
	var output string
	cmd := stackCommand(deps, "ps [-n NS] STACK", "List the tasks of a stack's services",
		func(cmd *cobra.Command, c stackClient, stack, ns string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			svcs, err := stackWorkloads(cmd.Context(), c, ns, map[string]string{compose.StackLabel: stack})
			if err != nil {
				return err
			}
			if len(svcs) == 0 {
				return fmt.Errorf("stack %s: no services or jobs of it in namespace %s", stack, ns)
			}
			tasks, err := c.List(cmd.Context(), legion.KindTask, ns, nil)
			if err != nil {
				return err
			}
			l := stackTasksListing(svcs, tasks, time.Now())
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		})
	outputFlag(cmd, &output)
	return cmd
}

// stackCommand is a command on the stack its one argument names, in the
// namespace -n names (by default the stack's own); run gets a connection.
func stackCommand(deps stackDeps, use, short string, run func(cmd *cobra.Command, c stackClient, stack, ns string) error) *cobra.Command {
	var namespace string
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			stack := args[0]
			c, done, err := connectStack(cmd, deps)
			if err != nil {
				return err
			}
			defer done()
			return run(cmd, c, stack, stackNamespace(namespace, stack))
		},
	}
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "namespace of the stack (default: the stack's name)")
	return cmd
}

func newStackLsCommand(deps stackDeps) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the stacks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			c, done, err := connectStack(cmd, deps)
			if err != nil {
				return err
			}
			defer done()
			svcs, err := stackWorkloads(cmd.Context(), c, "", nil)
			if err != nil {
				return err
			}
			l := stackListing(svcs)
			return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
		},
	}
	outputFlag(cmd, &output)
	return cmd
}

func newStackServicesCommand(deps stackDeps) *cobra.Command {
	var output string
	cmd := stackCommand(deps, "services [-n NS] STACK", "List a stack's services",
		func(cmd *cobra.Command, c stackClient, stack, ns string) error {
			fm, err := parseOutput(output)
			if err != nil {
				return err
			}
			objs, err := stackWorkloads(cmd.Context(), c, ns, map[string]string{compose.StackLabel: stack})
			if err != nil {
				return err
			}
			if !slices.ContainsFunc(objs, func(o legion.Object) bool { return o.GetKind() == legion.KindJob && compose.InStack(o, stack) }) {
				l := stackServicesListing(stack, objs, time.Now())
				return l.print(cmd.OutOrStdout(), cmd.ErrOrStderr(), fm)
			}
			// A job mode's services are Jobs: a table of their own,
			// after the Services'.
			return printGrouped(cmd, stackMembers(stack, objs), fm, grouping{kindNames: true})
		})
	outputFlag(cmd, &output)
	return cmd
}

// stackWorkloads lists the Services and then the Jobs (a compose file's
// services in a job mode) of namespace ns (every one when "") with the
// labels.
func stackWorkloads(ctx context.Context, c stackClient, ns string, labels map[string]string) ([]legion.Object, error) {
	var out []legion.Object
	for _, k := range compose.DeployedKinds() {
		objs, err := c.List(ctx, k, ns, labels)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", k.Plural(), err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

func stackNamespace(flag, stack string) string {
	if flag != "" {
		return flag
	}
	return stack
}

// runSteps carries out a plan, saying what it did, and returns what its
// applies did; it stops at the first failure. Consecutive applies go in
// one request, so the cluster admits them all or none: a stack the
// namespace may not run leaves nothing of itself behind.
func runSteps(cmd *cobra.Command, c stackClient, steps []compose.Step) ([]client.Result, error) {
	var res []client.Result
	out := cmd.OutOrStdout()
	for len(steps) > 0 {
		s := steps[0]
		if s.Op == compose.OpDelete {
			what := stepName(s)
			if err := c.Delete(cmd.Context(), s.Kind, s.Namespace, s.Name); err != nil {
				return res, fmt.Errorf("deleting %s: %w", what, err)
			}
			fmt.Fprintln(out, what, "deleted")
			steps = steps[1:]
			continue
		}
		n := 1
		for n < len(steps) && steps[n].Op == compose.OpApply {
			n++
		}
		objs := make([]legion.Object, n)
		for i, s := range steps[:n] {
			objs[i] = s.Object
		}
		outcomes, err := c.Apply(cmd.Context(), objs)
		if err != nil {
			if n == 1 {
				return res, fmt.Errorf("applying %s: %w", stepName(s), err)
			}
			return res, fmt.Errorf("applying the stack's %d objects: %w", n, err)
		}
		if len(outcomes) != n {
			return res, fmt.Errorf("applying the stack's %d objects: %d answers", n, len(outcomes))
		}
		for i, s := range steps[:n] {
			res = append(res, client.Result{Object: s.Object, Outcome: outcomes[i]})
			fmt.Fprintln(out, stepName(s), outcomes[i])
		}
		steps = steps[n:]
	}
	return res, nil
}

// stepName names a step's object as the other commands confirm what they
// did: kind/name -n NS.
func stepName(s compose.Step) string {
	what := strings.ToLower(string(s.Kind)) + "/" + s.Name
	if s.Namespace != "" {
		what += " -n " + s.Namespace
	}
	return what
}

// stackTaskView is a task as stack ps -o json prints it: its whole UID,
// which the table shortens.
type stackTaskView struct {
	ID           string           `json:"id"`
	Name         string           `json:"name"`
	Service      string           `json:"service"`
	Image        string           `json:"image"`
	Node         string           `json:"node,omitempty"`
	DesiredState legion.TaskState `json:"desiredState"`
	CurrentState legion.TaskState `json:"currentState"`
	Since        time.Time        `json:"since,omitzero"`
	Error        string           `json:"error,omitempty"`
}

// stackTaskIDLength is how much of a task's UID stack ps shows, as docker
// shortens its IDs: the end, which tells tasks apart (the store makes UIDs
// from the log index that created them, so they all start alike).
const stackTaskIDLength = 12

// stackTasksListing is stack ps: the tasks of the stack's Services (their
// history too), by service and slot, newest first within a slot. ERROR
// is the message of a task that is not running: why it failed, or what
// a pending one waits for.
func stackTasksListing(services, tasks []legion.Object, now time.Time) listing {
	mine := map[string]bool{}
	for _, o := range services {
		mine[string(o.GetKind())+"/"+o.GetMetadata().Name] = true
	}
	var ts []*legion.Task
	for _, o := range tasks {
		if t, ok := o.(*legion.Task); ok && mine[string(t.Spec.Owner.Kind)+"/"+t.Spec.Owner.Name] {
			ts = append(ts, t)
		}
	}
	slices.SortStableFunc(ts, func(a, b *legion.Task) int {
		if d := strings.Compare(a.Spec.Owner.Name, b.Spec.Owner.Name); d != 0 {
			return d
		}
		if d := a.Spec.Slot - b.Spec.Slot; d != 0 {
			return d
		}
		if d := b.Status.Timestamp.Compare(a.Status.Timestamp); d != 0 {
			return d
		}
		return strings.Compare(a.Metadata.Name, b.Metadata.Name)
	})
	l := listing{columns: cols("ID", "NAME", "IMAGE", "NODE", "DESIRED STATE", "CURRENT STATE", "ERROR"), none: "tasks"}
	for _, t := range ts {
		id := t.Metadata.UID
		if len(id) > stackTaskIDLength {
			id = id[len(id)-stackTaskIDLength:]
		}
		current := string(t.Status.State)
		if a := age(t.Status.Timestamp, now); a != "" {
			current += " " + a + " ago"
		}
		errText := ""
		switch st := t.Status.State; {
		case st == legion.TaskShutdown || st == legion.TaskComplete:
			// Stopped when told, or done: nothing went wrong, as docker
			// stack ps leaves the column empty (legion tasks says why).
		case st != legion.TaskRunning || !t.Status.Ready:
			// Also a running task that is not ready: its containers
			// restarting, or a probe failing, is what is wrong.
			errText = t.Status.Message
		}
		v := stackTaskView{ID: t.Metadata.UID, Name: t.Metadata.Name, Service: t.Spec.Owner.Name, Image: imagesOf(t.Spec.Pod), Node: t.Spec.Node,
			DesiredState: t.Spec.DesiredState, CurrentState: t.Status.State, Since: t.Status.Timestamp, Error: errText}
		l.add("task/"+t.Metadata.Name, v, id, t.Metadata.Name, v.Image, t.Spec.Node, string(t.Spec.DesiredState), current, errText)
	}
	return l
}
