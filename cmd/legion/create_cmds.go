package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/scheduler"
	"github.com/spf13/cobra"
)

// createCommand is legion create: kubectl's way of running a CronJob's
// Job at once (as one tries a CronJob out or runs a missed run by hand),
// of making a Namespace, and docker's of making a Secret or Config from a
// file. Objects are otherwise made with apply.
func (c *clusterCLI) createCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "create", SuggestFor: []string{"run"}, Short: "Make a Service from flags, a Job from a CronJob now, a Namespace, or a Secret or Config from a file (other objects: legion apply)"}
	var ns, from string
	job := &cobra.Command{
		Use:   "job NAME --from cronjob/CRONJOB",
		Short: "Run a CronJob's Job now, under NAME, as kubectl create job --from does",
		Long: `Create job makes a Job named NAME from a CronJob's job template, to run now.
It counts as a run of the CronJob (labelled legion.cronjob), as kubectl's
does: describe cronjob lists it, the concurrency policy sees it while it
runs, the history limits trim it, and deleting the CronJob deletes it. A
Job of that name already there is refused, not replaced.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" {
				return errors.New("create job: --from cronjob/NAME is required")
			}
			k, cronName, err := kindNameArg(from, "a cron job", legion.KindCronJob)
			if err != nil || k == "" {
				return fmt.Errorf("create job: --from %q: expected cronjob/NAME", from)
			}
			name := args[0]
			if err := legion.ValidName(name); err != nil {
				return fmt.Errorf("create job: name %q: %w", name, err)
			}
			cl, err := c.connect(cmd)
			if err != nil {
				return err
			}
			defer cl.Close()
			ctx := ctxOf(cmd)
			o, err := cl.Get(ctx, legion.KindCronJob, ns, cronName)
			if err != nil {
				return fmt.Errorf("create job: %w", err)
			}
			cj := o.(*legion.CronJob)
			j := &legion.Job{Header: legion.Header{APIVersion: legion.APIVersion, Kind: legion.KindJob,
				Metadata: legion.Metadata{Name: name, Namespace: cj.Metadata.Namespace,
					Labels: map[string]string{scheduler.LabelCronJob: cj.Metadata.Name}}},
				Spec: cj.Spec.Job}
			res, err := createNew(ctx, cl, j, client.ApplyOptions{Brief: true})
			if errors.Is(err, client.ErrAborted) {
				return fmt.Errorf("create job: job %s exists: delete it first, or choose another name", legion.DisplayName(j))
			}
			if err != nil {
				return fmt.Errorf("create job: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s created from cronjob/%s\n", ref(res.Object), cj.Metadata.Name)
			return nil
		},
	}
	job.Flags().StringVarP(&ns, "namespace", "n", "", "namespace of the CronJob, and of the Job (default: default)")
	job.Flags().StringVar(&from, "from", "", "the CronJob whose job template to run: cronjob/NAME")
	cmd.AddCommand(job, createNamespaceCommand(c), createValueCommand(c, legion.KindSecret), createValueCommand(c, legion.KindConfig),
		createServiceCommand(c), kubernetesCreate("deployment", "deploy"), kubernetesCreate("statefulset", "sts"), kubernetesCreate("daemonset", "ds"))
	return cmd
}

// kubernetesCreate is kubectl create KIND for a Kubernetes kind that is a
// Service here: refused saying what to run, whatever flags follow (so
// not "unknown flag: --image").
func kubernetesCreate(kind string, aliases ...string) *cobra.Command {
	return &cobra.Command{
		Use:                kind,
		Aliases:            aliases,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, how, _ := legion.KubernetesKind(kind)
			hint := map[string]string{
				"deployment":  "legion create service NAME --image IMAGE",
				"daemonset":   "legion create service NAME --image IMAGE --mode global",
				"statefulset": "write its manifest, with its volumes' claims, and legion apply it",
			}[kind]
			return fmt.Errorf("create %s: %s: %s", kind, how, hint)
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
