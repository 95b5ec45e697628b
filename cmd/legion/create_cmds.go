package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/scheduler"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// createCommand is legion create: kubectl's way of running a CronJob's
// Job at once (as one tries a CronJob out or runs a missed run by hand),
// of making a Namespace, and docker's of making a Secret or Config from a
// file. Objects are otherwise made with apply.
func (c *clusterCLI) createCommand() *cobra.Command {
	var f createFilesFlags
	cmd := &cobra.Command{
		Use:        "create KIND NAME [flags] | create -f FILE|DIR|URL|-",
		SuggestFor: []string{"run"},
		Short:      "Make a Service, Job or CronJob from flags, a Job from a CronJob now, a Namespace, a Secret or Config from a file, or the objects of manifests",
		Long: `Create makes objects and never replaces one: an object of that kind and
name already there is refused (legion apply makes or changes objects).

With -f it makes the objects of manifests, as kubectl create -f does: each
one on its own, namespaces first, and those already there refused by name
while the others are made. Otherwise KIND says what to make from flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(f.files) == 0 {
				return errors.New("create: give what to make (legion create service|job|cronjob|namespace|secret|config NAME ...) or the manifests to make it from (-f FILE)")
			}
			return c.createFiles(cmd, &f)
		},
	}
	f.add(cmd)
	cmd.AddCommand(createJobCommand(c), createCronJobCommand(c), createNamespaceCommand(c), createValueCommand(c, legion.KindSecret), createValueCommand(c, legion.KindConfig),
		createServiceCommand(c))
	for _, k := range kubernetesCreates {
		cmd.AddCommand(kubernetesCreate(k.kind, k.aliases, k.hint))
	}
	return cmd
}

// kubernetesCreates are kubectl create's kinds that Legion makes another
// way, with what to run instead (after what the kind is here, when it
// is one of legion.KubernetesKind's).
var kubernetesCreates = []struct {
	kind    string
	aliases []string
	hint    string
}{
	{"deployment", []string{"deploy"}, "legion create service NAME --image IMAGE"},
	{"daemonset", []string{"ds"}, "legion create service NAME --image IMAGE --mode global"},
	{"statefulset", []string{"sts"}, "write its manifest, with its volumes' claims, and legion apply it"},
	{"ingress", []string{"ing"}, "write a Route's manifest (host, path, service, port, tls) and legion apply it"},
	{"rolebinding", []string{"rb"}, "legion user create NAME --role view|edit|admin -n NAMESPACE makes a user's credentials and binding; a RoleBinding alone is applied from its manifest"},
	{"clusterrolebinding", nil, "roles here are of a namespace (legion user create NAME --role ROLE -n NAMESPACE); the cluster admin is the holder of admin.pem"},
	{"quota", []string{"resourcequota"}, "a namespace's quota is its Namespace's spec.quota: legion edit namespace NAME"},
	{"serviceaccount", []string{"sa"}, "Legion has no service accounts: legion user create NAME makes a user's credentials"},
	{"token", nil, "Legion's users hold certificates, not tokens: legion user create NAME writes them to a PEM file"},
}

// kubernetesCreate is kubectl create KIND for a kind Legion makes another
// way: refused saying what to run, whatever flags follow (so not
// "unknown flag: --image").
func kubernetesCreate(kind string, aliases []string, hint string) *cobra.Command {
	return &cobra.Command{
		Use:                kind,
		Aliases:            aliases,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, how, ok := legion.KubernetesKind(kind); ok {
				return fmt.Errorf("create %s: %s: %s", kind, how, hint)
			}
			return fmt.Errorf("create %s: %s", kind, hint)
		},
	}
}

// createNamespaceCommand is kubectl create namespace: a Namespace object
// with the defaults, refused when there is one already.
func createNamespaceCommand(c *clusterCLI) *cobra.Command {
	return &cobra.Command{
		Use:     "namespace NAME",
		Aliases: []string{"ns"},
		Short:   "Make a Namespace object, as kubectl create namespace does",
		Long: `Create namespace makes a Namespace object named NAME with the defaults:
isolation namespace, no quota, nothing loosened. Objects may live in a
namespace that has no Namespace object; the object holds the namespace's
settings, which legion apply changes. A Namespace already there is
refused, not replaced.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := legion.ValidName(name); err != nil {
				return fmt.Errorf("create namespace: name %q: %w", name, err)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			o, _ := legion.New(legion.KindNamespace)
			o.GetMetadata().Name = name
			res, err := createNew(ctxOf(cmd), cl, o, client.ApplyOptions{Brief: true})
			if errors.Is(err, client.ErrAborted) {
				return fmt.Errorf("create namespace: namespace %s exists (legion get namespace %s -o yaml shows it, legion apply changes it)", name, name)
			}
			if err != nil {
				return fmt.Errorf("create namespace: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s created\n", ref(res.Object))
			return nil
		},
	}
}

// createNew applies o only if nothing of its kind and name is stored
// (client.ErrAborted when something is): create makes, it never replaces.
// opts says the rest (a dry run, a brief answer).
func createNew(ctx context.Context, cl *client.Client, o legion.Object, opts client.ApplyOptions) (client.Result, error) {
	none := uint64(0)
	opts.ExpectedVersion = &none
	return cl.ApplyOne(ctx, o, opts)
}

// jobFlags are what create job and create cronjob make a Job of.
type jobFlags struct {
	containerFlags
	createOutput
	completions, parallelism, backoffLimit int
}

func (f *jobFlags) add(fl *pflag.FlagSet, kind string) {
	f.containerFlags.add(fl, "a "+kind+" made here has one container; a manifest has room for more")
	fl.IntVar(&f.completions, "completions", 1, "how many of its tasks must complete")
	fl.IntVar(&f.parallelism, "parallelism", 1, "how many of its tasks run at once")
	fl.IntVar(&f.backoffLimit, "backoff-limit", 6, "how many failures (failed tasks and restarts) it tolerates")
	f.createOutput.add(fl, kind)
}

// jobSpec is the JobSpec the flags describe: one container named name.
func (f jobFlags) jobSpec(name string, words []string) (legion.JobSpec, error) {
	ctr, err := f.container(name, words)
	if err != nil {
		return legion.JobSpec{}, err
	}
	backoff := f.backoffLimit
	return legion.JobSpec{Completions: f.completions, Parallelism: f.parallelism, BackoffLimit: &backoff,
		Pod: legion.PodSpec{Containers: []legion.Container{ctr}}}, nil
}

// createJobCommand is kubectl create job: a Job of one container from
// flags, or, with --from, a run of a CronJob's job template now.
func createJobCommand(c *clusterCLI) *cobra.Command {
	var ns, from string
	var f jobFlags
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "job NAME --image IMAGE [-- ARG...] | job NAME --from cronjob/CRONJOB",
		Short: "Run a Job of one container, or a CronJob's Job now, as kubectl create job does",
		Long: `Create job makes a Job named NAME that runs IMAGE in one container to
completion: the words after -- are its arguments (with --command, its
command and arguments), -e sets its environment, and --completions,
--parallelism and --backoff-limit its counts. --wait follows it to its end
(exit 0 complete, 1 failed, 2 on --timeout); --dry-run and -o work as for
create service.

With --from cronjob/CRONJOB it makes the Job from a CronJob's job
template, to run now. That Job counts as a run of the CronJob (labelled
legion.cronjob), as kubectl's does: describe cronjob lists it, the
concurrency policy sees it while it runs, the history limits trim it, and
deleting the CronJob deletes it. A Job of that name already there is
refused, not replaced.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("create job: %w", err)
			}
			words, err := argsAfterDash(cmd, "create job", args)
			if err != nil {
				return err
			}
			name := args[0]
			if err := legion.ValidName(name); err != nil {
				return fmt.Errorf("create job: name %q: %w", name, err)
			}
			var j *legion.Job
			switch {
			case from != "" && (f.image != "" || len(words) > 0):
				return errors.New("create job: --from runs a CronJob's job template as it is: give no --image or arguments with it")
			case from != "":
				if j, err = c.jobFromCronJob(cmd, ns, name, from); err != nil {
					return fmt.Errorf("create job: %w", err)
				}
			case f.image == "":
				return errors.New("create job: --image IMAGE (a Job of one container) or --from cronjob/NAME (a CronJob's) is required")
			default:
				spec, err := f.jobSpec(name, words)
				if err != nil {
					return fmt.Errorf("create job: %w", err)
				}
				o, _ := legion.New(legion.KindJob)
				j = o.(*legion.Job)
				j.Metadata = legion.Metadata{Name: name, Namespace: cmp.Or(ns, legion.DefaultNamespace)}
				j.Spec = spec
				if err := legion.Admit(j); err != nil {
					return fmt.Errorf("create job: %w", err)
				}
			}
			note := ""
			if from != "" {
				note = " from cronjob/" + j.Metadata.Labels[scheduler.LabelCronJob]
			}
			cl, made, err := f.create(cmd, c, "create job", j, wf.wait, note)
			if cl == nil || err != nil {
				return err
			}
			defer cl.Close()
			if !wf.wait {
				return nil
			}
			m := made.GetMetadata()
			return followJob(ctxOf(cmd), cl, cmd.OutOrStdout(), m.Namespace, m.Name, wf.timeout)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&ns, "namespace", "n", "", "namespace of the Job, and of the CronJob of --from (default: default)")
	fl.StringVar(&from, "from", "", "make it from a CronJob's job template: cronjob/NAME")
	f.add(fl, "job")
	wf.add(cmd)
	fl.Lookup("wait").Usage = "follow the job: exit 0 once it completed, 1 if it failed, 2 on the timeout"
	return cmd
}

// jobFromCronJob is the Job create job --from makes: the CronJob's job
// template, labelled as a run of it.
func (c *clusterCLI) jobFromCronJob(cmd *cobra.Command, ns, name, from string) (*legion.Job, error) {
	k, cronName, err := kindNameArg(from, "a cron job", legion.KindCronJob)
	if err != nil || k == "" {
		return nil, fmt.Errorf("--from %q: expected cronjob/NAME", from)
	}
	cl, err := c.connect(cmd)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	cj, err := client.GetAs[*legion.CronJob](ctxOf(cmd), cl, legion.KindCronJob, ns, cronName)
	if err != nil {
		return nil, err
	}
	return &legion.Job{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindJob,
		Metadata: legion.Metadata{Name: name, Namespace: cj.Metadata.Namespace,
			Labels: map[string]string{scheduler.LabelCronJob: cj.Metadata.Name}}},
		Spec: cj.Spec.Job}, nil
}

// createCronJobCommand is kubectl create cronjob: a CronJob of one
// container from flags.
func createCronJobCommand(c *clusterCLI) *cobra.Command {
	var ns, schedule string
	var f jobFlags
	cmd := &cobra.Command{
		Use:     "cronjob NAME --image IMAGE --schedule SCHEDULE [-- ARG...]",
		Aliases: []string{"cj"},
		Short:   "Make a CronJob of one container, as kubectl create cronjob does",
		Long: `Create cronjob makes a CronJob named NAME whose Jobs run IMAGE in one
container on SCHEDULE, five cron fields read in UTC ("30 2 * * *", or
@hourly, @daily, @weekly, @monthly, @yearly, stored as their fields). The
container and the Jobs' counts take create job's flags. Its other settings
(concurrency policy, starting deadline, history limits) are the defaults;
legion apply or legion edit change them.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			words, err := argsAfterDash(cmd, "create cronjob", args)
			if err != nil {
				return err
			}
			name := args[0]
			if err := legion.ValidName(name); err != nil {
				return fmt.Errorf("create cronjob: name %q: %w", name, err)
			}
			if schedule == "" {
				return errors.New("create cronjob: --schedule is required: five cron fields, read in UTC, such as \"30 2 * * *\"")
			}
			spec, err := f.jobSpec(name, words)
			if err != nil {
				return fmt.Errorf("create cronjob: %w", err)
			}
			o, _ := legion.New(legion.KindCronJob)
			cj := o.(*legion.CronJob)
			cj.Metadata = legion.Metadata{Name: name, Namespace: cmp.Or(ns, legion.DefaultNamespace)}
			cj.Spec.Schedule, cj.Spec.Job = schedule, spec
			if err := legion.Admit(cj); err != nil {
				return fmt.Errorf("create cronjob: %w", err)
			}
			cl, _, err := f.create(cmd, c, "create cronjob", cj, false, "")
			if cl != nil {
				cl.Close()
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&ns, "namespace", "n", "", "namespace of the CronJob (default: default)")
	fl.StringVar(&schedule, "schedule", "", "when its Jobs run: five cron fields, read in UTC, or @hourly, @daily, @weekly, @monthly, @yearly (required)")
	f.add(fl, "cron job")
	return cmd
}
