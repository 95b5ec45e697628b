package metrics

import (
	"github.com/legionbsd/legion"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	descObjects = prometheus.NewDesc("legion_objects", "Objects in the cluster, by kind and namespace (reported by the leader only).",
		[]string{"kind", "namespace"}, nil)
	descTasks = prometheus.NewDesc("legion_tasks", "Tasks by namespace and state (reported by the leader only).",
		[]string{"namespace", "state"}, nil)
	descRestarts = prometheus.NewDesc("legion_task_restarts",
		"Container restarts of the tasks not ended yet, by namespace and the Service or Job that owns them (reported by the leader only).",
		[]string{"namespace", "owner_kind", "owner"}, nil)
	descDesired = prometheus.NewDesc("legion_service_replicas", "Replicas a service wants now (reported by the leader only).",
		[]string{"namespace", "service"}, nil)
	descReady = prometheus.NewDesc("legion_service_ready_replicas", "A service's ready tasks (reported by the leader only).",
		[]string{"namespace", "service"}, nil)
	descNodes = prometheus.NewDesc("legion_nodes", "Nodes by state and availability (reported by the leader only).",
		[]string{"state", "availability"}, nil)
	descQuota = prometheus.NewDesc("legion_quota_limit",
		"A namespace's quota: cpu in cores, memory and storage in bytes, tasks, volumes and objects in number (reported by the leader only).",
		[]string{"namespace", "resource"}, nil)
	descQuotaUsed = prometheus.NewDesc("legion_quota_used",
		"What a namespace with a quota uses of it, in the units of legion_quota_limit (reported by the leader only).",
		[]string{"namespace", "resource"}, nil)
)

// clusterCollector reports the cluster as the store holds it, on the
// leader only: followers report nothing, so summing across managers counts
// each object once.
type clusterCollector struct{ src Source }

func (c clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descObjects, descTasks, descRestarts, descDesired, descReady, descNodes, descQuota, descQuotaUsed} {
		ch <- d
	}
}

func (c clusterCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.Store()
	if st == nil || !st.IsLeader() {
		return
	}
	byKind := map[legion.Kind][]legion.Object{}
	for _, k := range legion.Kinds() {
		objs, _, err := st.List(k, "", nil)
		if err != nil {
			return // the store is closing: report nothing rather than half
		}
		byKind[k] = objs
	}
	for _, m := range clusterMetrics(byKind) {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.GaugeValue, m.value, m.labels...)
	}
}

type sample struct {
	desc   *prometheus.Desc
	labels []string
	value  float64
}

// clusterMetrics counts the objects of each kind; pure, for tests.
func clusterMetrics(byKind map[legion.Kind][]legion.Object) []sample {
	var out []sample
	counts := map[[2]string]float64{}
	add := func(m map[[2]string]float64, a, b string, v float64) { m[[2]string{a, b}] += v }
	flush := func(d *prometheus.Desc, m map[[2]string]float64) {
		for k, v := range m {
			out = append(out, sample{d, []string{k[0], k[1]}, v})
		}
	}
	for _, k := range legion.Kinds() {
		for _, o := range byKind[k] {
			add(counts, string(k), o.GetMetadata().Namespace, 1)
		}
	}
	flush(descObjects, counts)

	tasks, restarts := map[[2]string]float64{}, map[[3]string]float64{}
	for _, o := range byKind[legion.KindTask] {
		t := o.(*legion.Task)
		ns := t.Metadata.Namespace
		state := t.Status.State
		if state == "" {
			state = legion.TaskPending
		}
		add(tasks, ns, string(state), 1)
		if !state.Terminal() {
			restarts[[3]string{ns, string(t.Spec.Owner.Kind), t.Spec.Owner.Name}] += float64(t.Status.Restarts)
		}
	}
	flush(descTasks, tasks)
	for k, v := range restarts {
		out = append(out, sample{descRestarts, []string{k[0], k[1], k[2]}, v})
	}

	for _, o := range byKind[legion.KindService] {
		s := o.(*legion.Service)
		l := []string{s.Metadata.Namespace, s.Metadata.Name}
		out = append(out, sample{descDesired, l, float64(s.Status.Replicas)}, sample{descReady, l, float64(s.Status.Ready)})
	}

	nodes := map[[2]string]float64{}
	for _, o := range byKind[legion.KindNode] {
		n := o.(*legion.Node)
		state, avail := n.Status.State, n.Spec.Availability
		if state == "" {
			state = legion.NodeUnknown
		}
		if avail == "" {
			avail = legion.AvailabilityActive
		}
		add(nodes, string(state), string(avail), 1)
	}
	flush(descNodes, nodes)

	for _, o := range byKind[legion.KindNamespace] {
		ns := o.(*legion.Namespace)
		q := ns.Spec.Quota
		if q == nil {
			continue
		}
		var used legion.QuotaUsage
		if ns.Status.Used != nil {
			used = *ns.Status.Used
		}
		quota := func(resource string, limit, use float64) {
			l := []string{ns.Metadata.Name, resource}
			out = append(out, sample{descQuota, l, limit}, sample{descQuotaUsed, l, use})
		}
		if q.CPU != nil {
			quota("cpu", float64(q.CPU.Millis())/1000, float64(used.CPU.Millis())/1000)
		}
		if q.Memory != nil {
			quota("memory", float64(*q.Memory), float64(used.Memory))
		}
		if q.Tasks != nil {
			quota("tasks", float64(*q.Tasks), float64(used.Tasks))
		}
		if q.Volumes != nil {
			quota("volumes", float64(*q.Volumes), float64(used.Volumes))
		}
		if q.Storage != nil {
			quota("storage", float64(*q.Storage), float64(used.Storage))
		}
		if q.Objects != nil {
			quota("objects", float64(*q.Objects), float64(used.Objects))
		}
	}
	return out
}
