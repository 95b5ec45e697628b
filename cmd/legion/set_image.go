package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/spf13/cobra"
)

// setCommand is kubectl set: one change to a workload without its
// manifest: its images, the change a deploy makes most, its environment
// or its resources.
func (c *clusterCLI) setCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "set", Short: "Change a workload's containers' images, environment or resources without its manifest"}
	cmd.AddCommand(c.setImageCommand(), c.setEnvCommand(), c.setResourcesCommand())
	return cmd
}

// setImageCommand is kubectl set image, and docker service update
// --image: a service's new images start a rolling update.
func (c *clusterCLI) setImageCommand() *cobra.Command {
	var ns string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "image SERVICE|KIND/NAME CONTAINER=IMAGE...",
		Short: "Set containers' images, as kubectl set image and docker service update --image do",
		Long: `Set image gives containers of a service (or KIND/NAME: service/web,
cronjob/nightly, job/migrate) new images: CONTAINER=IMAGE for each, init
containers too, or *=IMAGE for every container. For a service it starts a
rolling update, as any change to its pod does; --wait follows it, and
legion rollback goes back. The manifest the service was applied from keeps
the old image: apply it again and the image goes back too.`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("set image: %w", err)
			}
			kind, name, err := workloadArg(args[0])
			if err != nil {
				return fmt.Errorf("set image: %w", err)
			}
			images, err := imageArgs(args[1:])
			if err != nil {
				return fmt.Errorf("set image: %w", err)
			}
			return c.changePod(cmd, podChange{what: "image", held: "these images"}, kind, ns, name, wf, func(pod *legion.PodSpec) error {
				return setImages(pod, images)
			})
		},
	}
	cmd.Flags().StringVarP(&ns, "namespace", "n", "", "namespace of the workload (default: default)")
	wf.add(cmd)
	return cmd
}

// workloadArg reads the workload a set command changes: SERVICE, or
// KIND/NAME of a service, job or cron job.
func workloadArg(arg string) (legion.Kind, string, error) {
	kind, name, err := kindNameArg(arg, "a service, job or cron job", legion.KindService, legion.KindJob, legion.KindCronJob)
	return cmp.Or(kind, legion.KindService), name, err
}

// podChange names a set command's change: the word its outcome says
// (image, env, resources) and what the containers hold when nothing
// changed.
type podChange struct{ what, held string }

// changePod gives change to the pod of workload kind ns/name, as set
// image, env and resources do: the outcome said as kubectl says it, and
// a service's rollout followed with --wait (refused for a Job or CronJob,
// whose change is for their next tasks).
func (c *clusterCLI) changePod(cmd *cobra.Command, pc podChange, kind legion.Kind, ns, name string, wf waitFlags, change func(*legion.PodSpec) error) error {
	if wf.wait && kind != legion.KindService {
		return fmt.Errorf("set %s: --wait follows a service's rollout; a %s's change is for its next tasks", pc.what, kind)
	}
	res, err := c.updateObject(cmd, kind, ns, name, func(o legion.Object) error { return change(legion.PodOf(o)) })
	if err != nil {
		return fmt.Errorf("set %s: %w", pc.what, err)
	}
	if res.Outcome == client.Unchanged {
		fmt.Fprintf(cmd.OutOrStdout(), "%s unchanged: its containers have %s already\n", ref(res.Object), pc.held)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "%s %s updated\n", ref(res.Object), pc.what)
	}
	if kind != legion.KindService {
		return nil
	}
	m := res.Object.GetMetadata()
	return c.waitRollout(cmd, wf, m.Namespace, m.Name, false)
}

// imageArgs reads CONTAINER=IMAGE arguments; * names every container.
func imageArgs(args []string) (map[string]string, error) {
	out := map[string]string{}
	for _, a := range args {
		ctr, img, ok := strings.Cut(a, "=")
		if !ok || ctr == "" || img == "" {
			return nil, fmt.Errorf("%q: expected CONTAINER=IMAGE (or *=IMAGE for every container)", a)
		}
		if _, dup := out[ctr]; dup {
			return nil, fmt.Errorf("container %s is given twice", ctr)
		}
		out[ctr] = img
	}
	if _, all := out["*"]; all && len(out) > 1 {
		return nil, fmt.Errorf("*=IMAGE sets every container: name no other")
	}
	return out, nil
}

// setImages sets the images of the pod's containers (init containers
// too) named in images, or of all with "*"; a name the pod has no
// container of is refused, naming those it has.
func setImages(pod *legion.PodSpec, images map[string]string) error {
	for ctr := range images {
		if ctr != "*" && !slices.Contains(podContainerNames(pod), ctr) {
			return noContainer(pod, ctr)
		}
	}
	all, every := images["*"]
	for _, c := range pod.AllContainers() {
		if img, ok := images[c.Name]; ok {
			c.Image = img
		} else if every {
			c.Image = all
		}
	}
	return nil
}
