package topui

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
)

// Row is one line of a tab: the object it stands for and its cells.
type Row struct {
	Kind      legion.Kind
	Namespace string
	Name      string
	Owner     string // a task's owner's name, for Enter on a workload
	Node      string // a task's node, for Enter on a node
	Cells     []string
}

// view is a tab: its columns and the rows it makes of the data.
type view struct {
	name    string
	kinds   []legion.Kind // listed for it: a denied one is said under the table
	columns []string
	rows    func(d *Data) []Row
}

// views are the tabs, in order.
var views = []view{
	{"nodes", []legion.Kind{legion.KindNode}, []string{"NAME", "STATE", "AVAILABILITY", "ROLE", "TASKS", "CPU", "MEMORY"}, nodeRows},
	{"workloads", []legion.Kind{legion.KindService, legion.KindJob, legion.KindCronJob},
		[]string{"KIND", "NAMESPACE", "NAME", "MODE", "TASKS", "READY", "CPU", "MEMORY"}, workloadRows},
	{"tasks", []legion.Kind{legion.KindTask}, []string{"NAMESPACE", "NAME", "NODE", "STATE", "READY", "JAIL", "RESTARTS", "CPU", "MEMORY"}, taskRows},
	{"storage", []legion.Kind{legion.KindVolume}, []string{"NAMESPACE", "NAME", "DRIVER", "SIZE", "NODE", "TASKS", "MIGRATION"}, storageRows},
	{"network", []legion.Kind{legion.KindRoute, legion.KindNetworkPolicy}, []string{"KIND", "NAMESPACE", "NAME", "DETAIL"}, networkRows},
	{"config", []legion.Kind{legion.KindNamespace, legion.KindSecret, legion.KindConfig, legion.KindRoleBinding},
		[]string{"KIND", "NAMESPACE", "NAME", "DETAIL"}, configRows},
	{"events", nil, []string{"AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"}, eventRows},
}

func sortRows(rows []Row) {
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// bar is a text bar of used against of, width cells wide, with the share.
func bar(used, of int64, width int) string {
	if of <= 0 {
		return strings.Repeat("░", width) + "   -"
	}
	n := int(min(used*int64(width)/of, int64(width)))
	return strings.Repeat("█", n) + strings.Repeat("░", width-n) + fmt.Sprintf(" %3d%%", used*100/of)
}

func nodeRows(d *Data) []Row {
	nodes := of[*legion.Node](d, legion.KindNode)
	role := map[string]string{}
	for _, n := range nodes {
		role[n.Metadata.Name] = string(n.Spec.Role)
	}
	var rows []Row
	for _, n := range Nodes(nodes, of[*legion.Task](d, legion.KindTask), d.Usage) {
		rows = append(rows, Row{Kind: legion.KindNode, Name: n.Name, Node: n.Name, Cells: []string{n.Name, string(n.State), string(n.Availability),
			role[n.Name], strconv.Itoa(n.Tasks),
			bar(int64(n.CPU), int64(n.CPUAllocatable), 10) + " " + FormatCPU(n.CPU) + "/" + FormatCPU(n.CPUAllocatable),
			bar(int64(n.Memory), int64(n.MemoryAllocatable), 10) + " " + FormatBytes(n.Memory) + "/" + FormatBytes(n.MemoryAllocatable)}})
	}
	return rows
}

func workloadRows(d *Data) []Row {
	tasks := of[*legion.Task](d, legion.KindTask)
	use := map[[2]string]*ServiceUsage{}
	sus := Services(of[*legion.Service](d, legion.KindService), tasks, d.Usage)
	for i := range sus {
		use[[2]string{sus[i].Namespace, sus[i].Name}] = &sus[i]
	}
	var rows []Row
	for _, s := range of[*legion.Service](d, legion.KindService) {
		u := use[[2]string{s.Metadata.Namespace, s.Metadata.Name}]
		rows = append(rows, Row{Kind: legion.KindService, Namespace: s.Metadata.Namespace, Name: s.Metadata.Name, Owner: s.Metadata.Name,
			Cells: []string{"service", s.Metadata.Namespace, s.Metadata.Name, string(s.Spec.Mode),
				fmt.Sprintf("%d/%d", s.Status.Running, s.Status.Replicas), strconv.Itoa(s.Status.Ready), reported(u.Reported, FormatCPU(u.CPU)), reported(u.Reported, FormatBytes(u.Memory))}})
	}
	for _, j := range of[*legion.Job](d, legion.KindJob) {
		rows = append(rows, Row{Kind: legion.KindJob, Namespace: j.Metadata.Namespace, Name: j.Metadata.Name, Owner: j.Metadata.Name,
			Cells: []string{"job", j.Metadata.Namespace, j.Metadata.Name, string(j.Spec.Mode),
				fmt.Sprintf("%d active", j.Status.Active), fmt.Sprintf("%d done", j.Status.Succeeded), "-", "-"}})
	}
	for _, c := range of[*legion.CronJob](d, legion.KindCronJob) {
		mode := "cron " + c.Spec.Schedule
		if c.Spec.Suspend {
			mode += " (suspended)"
		}
		rows = append(rows, Row{Kind: legion.KindCronJob, Namespace: c.Metadata.Namespace, Name: c.Metadata.Name, Owner: c.Metadata.Name,
			Cells: []string{"cronjob", c.Metadata.Namespace, c.Metadata.Name, mode, fmt.Sprintf("%d active", len(c.Status.Active)), "-", "-", "-"}})
	}
	sortRows(rows)
	return rows
}

func taskRows(d *Data) []Row {
	by := usageByTask(d.Usage)
	var rows []Row
	for _, t := range of[*legion.Task](d, legion.KindTask) {
		cpu, mem := "-", "-"
		if u, ok := by[taskKey{t.Metadata.Namespace, t.Metadata.Name}]; ok && u.Node == t.Spec.Node && live(t) {
			cpu, mem = FormatCPU(u.CPU), FormatBytes(u.Memory)
		}
		ready := "no"
		if t.Status.Ready {
			ready = "yes"
		}
		rows = append(rows, Row{Kind: legion.KindTask, Namespace: t.Metadata.Namespace, Name: t.Metadata.Name, Owner: t.Spec.Owner.Name, Node: t.Spec.Node,
			Cells: []string{t.Metadata.Namespace, t.Metadata.Name, orNone(t.Spec.Node), orNone(string(t.Status.State)), ready, orNone(t.Status.PodJail),
				strconv.Itoa(t.Status.Restarts), cpu, mem}})
	}
	sortRows(rows)
	return rows
}

// reported is an amount when some report gave it, "-" otherwise.
func reported(ok bool, s string) string {
	if !ok {
		return "-"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func storageRows(d *Data) []Row {
	users := map[[2]string][]string{}
	for _, t := range of[*legion.Task](d, legion.KindTask) {
		if !live(t) {
			continue
		}
		for _, v := range t.Spec.Volumes {
			k := [2]string{t.Metadata.Namespace, v}
			users[k] = append(users[k], t.Metadata.Name)
		}
	}
	var rows []Row
	for _, v := range of[*legion.Volume](d, legion.KindVolume) {
		size := "-"
		if v.Spec.Size > 0 {
			size = FormatBytes(v.Spec.Size)
		}
		mig := "-"
		if m := v.Status.Migration; m != nil {
			mig = fmt.Sprintf("%s %s->%s", m.State, m.From, m.To)
		}
		us := users[[2]string{v.Metadata.Namespace, v.Metadata.Name}]
		sort.Strings(us)
		rows = append(rows, Row{Kind: legion.KindVolume, Namespace: v.Metadata.Namespace, Name: v.Metadata.Name,
			Cells: []string{v.Metadata.Namespace, v.Metadata.Name, string(v.Spec.Driver), size, orNone(v.Status.Node), orNone(strings.Join(us, ",")), mig}})
	}
	sortRows(rows)
	return rows
}

func networkRows(d *Data) []Row {
	var rows []Row
	for _, r := range of[*legion.Route](d, legion.KindRoute) {
		detail := r.Spec.Host + r.Spec.Path + " -> " + r.Spec.Service
		if r.Spec.TLS != nil {
			detail += " (tls " + r.Spec.TLS.Secret + ")"
		}
		rows = append(rows, Row{Kind: legion.KindRoute, Namespace: r.Metadata.Namespace, Name: r.Metadata.Name,
			Cells: []string{"route", r.Metadata.Namespace, r.Metadata.Name, detail}})
	}
	for _, p := range of[*legion.NetworkPolicy](d, legion.KindNetworkPolicy) {
		sel := "every service"
		if len(p.Spec.Services) > 0 {
			var kv []string
			for k, v := range p.Spec.Services {
				kv = append(kv, k+"="+v)
			}
			sort.Strings(kv)
			sel = strings.Join(kv, ",")
		}
		egress := "egress open"
		if p.Spec.Egress != nil {
			egress = fmt.Sprintf("%d egress rules", len(*p.Spec.Egress))
		}
		rows = append(rows, Row{Kind: legion.KindNetworkPolicy, Namespace: p.Metadata.Namespace, Name: p.Metadata.Name,
			Cells: []string{"networkpolicy", p.Metadata.Namespace, p.Metadata.Name, fmt.Sprintf("%s: %d ingress rules, %s", sel, len(p.Spec.Ingress), egress)}})
	}
	sortRows(rows)
	return rows
}

func quotaDetail(n *legion.Namespace) string {
	q := n.Spec.Quota
	if q == nil {
		return "no quota"
	}
	var used legion.QuotaUsage
	if n.Status.Used != nil {
		used = *n.Status.Used
	}
	var parts []string
	if q.CPU != nil {
		parts = append(parts, "cpu "+FormatCPU(used.CPU)+"/"+FormatCPU(*q.CPU))
	}
	if q.Memory != nil {
		parts = append(parts, "memory "+FormatBytes(used.Memory)+"/"+FormatBytes(*q.Memory))
	}
	if q.Tasks != nil {
		parts = append(parts, fmt.Sprintf("tasks %d/%d", used.Tasks, *q.Tasks))
	}
	if q.Volumes != nil {
		parts = append(parts, fmt.Sprintf("volumes %d/%d", used.Volumes, *q.Volumes))
	}
	if q.Storage != nil {
		parts = append(parts, "storage "+FormatBytes(used.Storage)+"/"+FormatBytes(*q.Storage))
	}
	if q.Objects != nil {
		parts = append(parts, fmt.Sprintf("objects %d/%d", used.Objects, *q.Objects))
	}
	return "quota " + strings.Join(parts, ", ")
}

func configRows(d *Data) []Row {
	var rows []Row
	for _, n := range of[*legion.Namespace](d, legion.KindNamespace) {
		rows = append(rows, Row{Kind: legion.KindNamespace, Name: n.Metadata.Name, Cells: []string{"namespace", "-", n.Metadata.Name, quotaDetail(n)}})
	}
	for _, s := range of[*legion.Secret](d, legion.KindSecret) {
		size := d.SecretSizes[s.Metadata.Namespace+"/"+s.Metadata.Name]
		rows = append(rows, Row{Kind: legion.KindSecret, Namespace: s.Metadata.Namespace, Name: s.Metadata.Name,
			Cells: []string{"secret", s.Metadata.Namespace, s.Metadata.Name, fmt.Sprintf("%d bytes", size)}})
	}
	for _, c := range of[*legion.Config](d, legion.KindConfig) {
		rows = append(rows, Row{Kind: legion.KindConfig, Namespace: c.Metadata.Namespace, Name: c.Metadata.Name,
			Cells: []string{"config", c.Metadata.Namespace, c.Metadata.Name, fmt.Sprintf("%d bytes", len(c.Spec.Data)+len(c.Spec.Text))}})
	}
	for _, b := range of[*legion.RoleBinding](d, legion.KindRoleBinding) {
		rows = append(rows, Row{Kind: legion.KindRoleBinding, Namespace: b.Metadata.Namespace, Name: b.Metadata.Name,
			Cells: []string{"rolebinding", b.Metadata.Namespace, b.Metadata.Name, b.Spec.User + " is " + string(b.Spec.Role)}})
	}
	sortRows(rows)
	return rows
}

// age is how long ago t was, in the largest whole unit.
func age(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(int(d.Seconds()), 0))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func eventRows(d *Data) []Row {
	// Newest first: the log of changes reads from the top.
	rows := make([]Row, 0, len(d.Events))
	for i := len(d.Events) - 1; i >= 0; i-- {
		e := d.Events[i]
		reason := e.Reason
		if e.Count > 1 {
			reason += fmt.Sprintf(" (x%d)", e.Count)
		}
		rows = append(rows, Row{Kind: e.Object.Kind, Namespace: e.Object.Namespace, Name: e.Object.Name,
			Cells: []string{age(d.Now, e.Time), string(e.Type), reason, e.Object.String(), e.Message}})
	}
	return rows
}
