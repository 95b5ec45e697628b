package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

// resourceChanges are set resources' --limits and --requests: each
// resource given is set, the others kept.
type resourceChanges struct {
	limitCPU, requestCPU       *legion.CPU
	limitMemory, requestMemory *legion.Bytes
}

// setResourcesCommand is kubectl set resources: a workload's containers'
// CPU and memory requests and limits changed without its manifest.
func (c *clusterCLI) setResourcesCommand() *cobra.Command {
	var ns, container, limits, requests string
	var wf waitFlags
	cmd := &cobra.Command{
		Use:   "resources SERVICE|KIND/NAME [--limits cpu=C,memory=M] [--requests cpu=C,memory=M]",
		Short: "Set containers' CPU and memory requests and limits, as kubectl set resources does",
		Long: `Set resources changes the CPU and memory of a service's containers (or
KIND/NAME: service/web, cronjob/nightly, job/migrate): --limits what each
may use at most, --requests what placement and quotas count, each as
cpu=QUANTITY,memory=QUANTITY in the manifests' units (cpu=500m,
memory=512Mi); a resource not given keeps its value, and 0 removes one.
-c names the container (by default every container, init containers too).
A request above its limit is refused. For a service it starts a rolling
update, as any change to its pod does; --wait follows it. The manifest is
not changed: applied again, its resources come back.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := wf.check(); err != nil {
				return fmt.Errorf("set resources: %w", err)
			}
			kind, name, err := workloadArg(args[0])
			if err != nil {
				return fmt.Errorf("set resources: %w", err)
			}
			rc, err := parseResourceChanges(limits, requests)
			if err != nil {
				return fmt.Errorf("set resources: %w", err)
			}
			return c.changePod(cmd, podChange{what: "resources", held: "these resources"}, kind, ns, name, wf, func(pod *legion.PodSpec) error {
				return setResources(pod, container, rc)
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&ns, "namespace", "n", "", "namespace of the workload (default: default)")
	f.StringVarP(&container, "containers", "c", "", "the container to change (default: every container)")
	f.StringVar(&limits, "limits", "", "cpu=QUANTITY,memory=QUANTITY: what each container may use at most")
	f.StringVar(&requests, "requests", "", "cpu=QUANTITY,memory=QUANTITY: what each container requests, which placement and quotas count")
	wf.add(cmd)
	return cmd
}

// parseResourceChanges reads --limits and --requests, kubectl's
// cpu=200m,memory=512Mi; anything but cpu and memory is refused.
func parseResourceChanges(limits, requests string) (resourceChanges, error) {
	var rc resourceChanges
	if limits == "" && requests == "" {
		return rc, errors.New("give --limits or --requests (cpu=500m,memory=512Mi)")
	}
	for _, f := range []struct {
		flag, value string
		cpu         **legion.CPU
		memory      **legion.Bytes
	}{{"--limits", limits, &rc.limitCPU, &rc.limitMemory}, {"--requests", requests, &rc.requestCPU, &rc.requestMemory}} {
		if f.value == "" {
			continue
		}
		for _, pair := range strings.Split(f.value, ",") {
			k, v, ok := strings.Cut(pair, "=")
			switch {
			case !ok:
				return rc, fmt.Errorf("%s %q: expected cpu=QUANTITY or memory=QUANTITY", f.flag, pair)
			case k == "cpu":
				c, err := legion.ParseCPU(v)
				if err != nil {
					return rc, fmt.Errorf("%s cpu=%s: %w", f.flag, v, err)
				}
				*f.cpu = &c
			case k == "memory":
				b, err := legion.ParseBytes(v)
				if err != nil {
					return rc, fmt.Errorf("%s memory=%s: %w", f.flag, v, err)
				}
				*f.memory = &b
			default:
				return rc, fmt.Errorf("%s %s: only cpu and memory are set here (a container's maxproc and openfiles are in its manifest's resources.limits)", f.flag, k)
			}
		}
	}
	return rc, nil
}

// setResources applies rc to the pod's containers named (every one when
// container is empty).
func setResources(pod *legion.PodSpec, container string, rc resourceChanges) error {
	ctrs, err := podContainers(pod, container)
	if err != nil {
		return err
	}
	for _, c := range ctrs {
		r := &c.Resources
		if rc.limitCPU != nil {
			r.Limits.CPU = *rc.limitCPU
		}
		if rc.limitMemory != nil {
			r.Limits.Memory = *rc.limitMemory
		}
		if rc.requestCPU != nil {
			r.Requests.CPU = *rc.requestCPU
		}
		if rc.requestMemory != nil {
			r.Requests.Memory = *rc.requestMemory
		}
	}
	return nil
}
