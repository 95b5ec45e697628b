// Package metrics is what a node's agent reports to Prometheus: each
// running container's usage beside its limits, the node's pods, its image
// store and the sessions it serves. Collectors read at scrape time; the
// caller owns the registry and serves it.
package metrics

import (
	"context"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/jail"
	"github.com/prometheus/client_golang/prometheus"
)

// Labels the agent puts on its containers (internal/agent's); repeated
// here so this package needs nothing of the agent but its data.
const (
	labelNode      = "legion.node.id"
	labelTask      = "legion.task.id"
	labelTaskName  = "legion.task.name"
	labelNamespace = "legion.namespace"
	labelContainer = "legion.container"
)

// scrapeTimeout bounds what one scrape asks the runtime.
const scrapeTimeout = 5 * time.Second

// Runtime is what the collector asks of the node's container runtime.
type Runtime interface {
	List(ctx context.Context, selector map[string]string) ([]jail.ContainerStatus, error)
	Usage(ctx context.Context, id string) (jail.Usage, error)
}

// Source is what the agent's collector reads. Only Node and Runtime are
// required; an unset function leaves its families out.
type Source struct {
	Node    string
	Runtime Runtime
	// Tasks are the tasks the agent runs, for their containers' limits.
	Tasks func() []*legion.Task
	// Images lists the node's image store.
	Images func() ([]*image.Record, error)
	// Sessions counts the sessions open now and served since the start,
	// by kind.
	Sessions func() (open map[string]int, served map[string]uint64)
	// NodeMemory is the node's available memory as the agent last
	// measured it, the threshold below which it evicts tasks (negative:
	// eviction off) and whether it has a measure.
	NodeMemory func() (available, threshold int64, measured bool)
	// Evictions counts the tasks evicted under node memory pressure since
	// the agent started, by reason.
	Evictions func() map[string]uint64
}

var (
	containerLabels = []string{"namespace", "task", "container"}
	descCPU         = prometheus.NewDesc("legion_container_cpu_seconds_total", "CPU time a running container has used.", containerLabels, nil)
	descMem         = prometheus.NewDesc("legion_container_memory_bytes", "Resident memory of a running container.", containerLabels, nil)
	descProcs       = prometheus.NewDesc("legion_container_processes", "Processes of a running container.", containerLabels, nil)
	descFiles       = prometheus.NewDesc("legion_container_open_files", "Files a running container holds open.", containerLabels, nil)
	descCPULimit    = prometheus.NewDesc("legion_container_cpu_limit_cores", "A running container's CPU limit, in cores (absent when unlimited).", containerLabels, nil)
	descMemLimit    = prometheus.NewDesc("legion_container_memory_limit_bytes", "A running container's memory limit (absent when unlimited).", containerLabels, nil)
	descUnread      = prometheus.NewDesc("legion_agent_usage_unread", "Running containers whose usage could not be read (no racct, or the runtime failed).", nil, nil)
	descPods        = prometheus.NewDesc("legion_agent_pods", "Pods on this node, by namespace.", []string{"namespace"}, nil)
	descContainers  = prometheus.NewDesc("legion_agent_containers", "Containers of pods on this node (infra containers left out), by state.", []string{"state"}, nil)
	descImages      = prometheus.NewDesc("legion_agent_images", "Images in this node's store.", nil, nil)
	descLayerBytes  = prometheus.NewDesc("legion_agent_image_layer_bytes", "Compressed size of the distinct layers this node's images are made of.", nil, nil)
	descSessions    = prometheus.NewDesc("legion_agent_sessions", "Sessions (logs, exec, port-forward, volume moves) this node serves now, by kind.", []string{"kind"}, nil)
	descSessionsAll = prometheus.NewDesc("legion_agent_sessions_total", "Sessions offered to this node since its agent started, by kind.", []string{"kind"}, nil)
	descMemAvail    = prometheus.NewDesc("legion_agent_memory_available_bytes", "The node's available memory as the agent last measured it (absent while it cannot).", nil, nil)
	descMemPressure = prometheus.NewDesc("legion_agent_memory_pressure", "1 while the node's available memory is below the eviction threshold, when tasks are evicted; 0 otherwise (absent when eviction is off or memory unmeasured).", nil, nil)
	descEvictions   = prometheus.NewDesc("legion_agent_evictions_total", "Tasks evicted under node memory pressure since the agent started, by reason (no-memory-request, over-memory-request).", []string{"reason"}, nil)
)

// Register adds the agent's families to reg.
func Register(reg prometheus.Registerer, src Source) error {
	return reg.Register(collector{src})
}

type collector struct{ src Source }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCPU, descMem, descProcs, descFiles, descCPULimit, descMemLimit, descUnread,
		descPods, descContainers, descImages, descLayerBytes, descSessions, descSessionsAll, descMemAvail, descMemPressure, descEvictions} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	emit := func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, t, v, labels...)
	}
	c.containers(ctx, emit)
	if c.src.Images != nil {
		if recs, err := c.src.Images(); err == nil {
			emit(descImages, prometheus.GaugeValue, float64(len(recs)))
			emit(descLayerBytes, prometheus.GaugeValue, float64(layerBytes(recs)))
		}
	}
	if c.src.Sessions != nil {
		open, served := c.src.Sessions()
		for k, n := range open {
			emit(descSessions, prometheus.GaugeValue, float64(n), k)
		}
		for k, n := range served {
			emit(descSessionsAll, prometheus.CounterValue, float64(n), k)
		}
	}
	if c.src.NodeMemory != nil {
		if avail, threshold, ok := c.src.NodeMemory(); ok {
			emit(descMemAvail, prometheus.GaugeValue, float64(avail))
			if threshold >= 0 {
				pressure := 0.0
				if avail < threshold {
					pressure = 1
				}
				emit(descMemPressure, prometheus.GaugeValue, pressure)
			}
		}
	}
	if c.src.Evictions != nil {
		for reason, n := range c.src.Evictions() {
			emit(descEvictions, prometheus.CounterValue, float64(n), reason)
		}
	}
}

type emitFunc func(d *prometheus.Desc, t prometheus.ValueType, v float64, labels ...string)

func (c collector) containers(ctx context.Context, emit emitFunc) {
	cs, err := c.src.Runtime.List(ctx, map[string]string{labelNode: c.src.Node})
	if err != nil {
		return
	}
	limits := containerLimits(c.src.Tasks)
	pods := map[string]int{}
	states := map[jail.State]int{}
	unread := 0
	for _, ct := range cs {
		ns := ct.Labels[labelNamespace]
		if ct.Infra {
			pods[ns]++
			continue
		}
		states[ct.State]++
		if ct.State != jail.StateRunning {
			continue
		}
		name := ct.Labels[labelContainer]
		l := []string{ns, ct.Labels[labelTaskName], name}
		use, err := c.src.Runtime.Usage(ctx, ct.ID)
		if err != nil {
			unread++
		} else {
			emit(descCPU, prometheus.CounterValue, use.CPUTime.Seconds(), l...)
			emit(descMem, prometheus.GaugeValue, float64(use.MemoryBytes), l...)
			emit(descProcs, prometheus.GaugeValue, float64(use.Processes), l...)
			emit(descFiles, prometheus.GaugeValue, float64(use.OpenFiles), l...)
		}
		lim := limits[[2]string{ct.Labels[labelTask], name}]
		if lim.CPU > 0 {
			emit(descCPULimit, prometheus.GaugeValue, float64(lim.CPU.Millis())/1000, l...)
		}
		if lim.Memory > 0 {
			emit(descMemLimit, prometheus.GaugeValue, float64(lim.Memory), l...)
		}
	}
	emit(descUnread, prometheus.GaugeValue, float64(unread))
	for ns, n := range pods {
		emit(descPods, prometheus.GaugeValue, float64(n), ns)
	}
	for st, n := range states {
		emit(descContainers, prometheus.GaugeValue, float64(n), string(st))
	}
}

// containerLimits are the limits of each task's containers, by task uid
// and container name.
func containerLimits(tasks func() []*legion.Task) map[[2]string]legion.ResourceLimits {
	out := map[[2]string]legion.ResourceLimits{}
	if tasks == nil {
		return out
	}
	for _, t := range tasks() {
		for _, c := range append(append([]legion.Container{}, t.Spec.Pod.InitContainers...), t.Spec.Pod.Containers...) {
			out[[2]string{t.Metadata.UID, c.Name}] = c.Resources.Limits
		}
	}
	return out
}

// layerBytes sums the compressed sizes of the distinct layers of recs.
func layerBytes(recs []*image.Record) int64 {
	seen := map[string]bool{}
	var n int64
	for _, r := range recs {
		for _, l := range r.Layers {
			if !seen[l.Digest] {
				seen[l.Digest] = true
				n += l.Size
			}
		}
	}
	return n
}
