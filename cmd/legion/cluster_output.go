package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"go.yaml.in/yaml/v3"
)

// objectListing is get's listing of objects: per kind a table that says
// what matters of it, as docker service ls and kubectl get do; -A adds the
// namespace. single: one object asked for by name.
func objectListing(objs []legion.Object, withNamespace, single bool, now time.Time) listing {
	t := genericTable
	kind, ok := oneKind(objs)
	if kt, found := kindTables[kind]; ok && found {
		t = kt
	}
	var l listing
	if withNamespace {
		l.columns = append(l.columns, column{name: "NAMESPACE"})
	}
	l.columns = append(l.columns, t.columns...)
	if ok {
		l.none = plural(strings.ToLower(string(kind)))
	}
	l.single = single
	for _, o := range objs {
		var cells []string
		if withNamespace {
			cells = append(cells, o.GetMetadata().Namespace)
		}
		l.add(objectName(o), o, append(cells, t.row(o, now)...)...)
	}
	return l
}

// objectName is kind/name, as -o name and the confirmation lines say it.
func objectName(o legion.Object) string {
	return strings.ToLower(string(o.GetKind())) + "/" + o.GetMetadata().Name
}

// oneKind is the kind every object has, if they share one.
func oneKind(objs []legion.Object) (legion.Kind, bool) {
	if len(objs) == 0 {
		return "", false
	}
	k := objs[0].GetKind()
	for _, o := range objs[1:] {
		if o.GetKind() != k {
			return "", false
		}
	}
	return k, true
}

// kindTable is a kind's table: its columns and an object's cells.
type kindTable struct {
	columns []column
	row     func(o legion.Object, now time.Time) []string
}

func cols(names ...string) []column {
	var c []column
	for _, n := range names {
		wide := strings.HasPrefix(n, "+")
		c = append(c, column{name: strings.TrimPrefix(n, "+"), wide: wide})
	}
	return c
}

// genericTable is for a mix of kinds: what every object has.
var genericTable = kindTable{cols("NAME", "KIND", "VERSION", "GENERATION", "LABELS"), func(o legion.Object, _ time.Time) []string {
	m := o.GetMetadata()
	return []string{m.Name, string(o.GetKind()), fmt.Sprint(m.Version), fmt.Sprint(m.Generation), labelString(m.Labels)}
}}

// kindTables: columns marked + show with -o wide only.
var kindTables = map[legion.Kind]kindTable{
	legion.KindService: {cols("NAME", "MODE", "REPLICAS", "IMAGE", "PORTS", "UPDATE", "+VIP", "+RUNNING", "+GENERATION", "+MESSAGE"), func(o legion.Object, _ time.Time) []string {
		s := o.(*legion.Service)
		sum := compose.Summarize(s)
		update := sum.Update
		if u := s.Status.Update; u != nil && u.Message != "" && (u.State == legion.UpdatePaused || u.State == legion.UpdateRollbackPaused) {
			update += ": " + u.Message
		}
		return []string{sum.Name, string(sum.Mode), sum.Replicas, sum.Image, sum.Ports, update,
			s.Status.VIP, fmt.Sprint(s.Status.Running), fmt.Sprint(s.Metadata.Generation), s.Status.Message}
	}},
	legion.KindNode: {cols("NAME", "HOSTNAME", "ADDRESS", "STATE", "AVAILABILITY", "ROLE", "+PLATFORM", "+VERSION", "+DRAIN", "+MESSAGE"), func(o legion.Object, now time.Time) []string {
		n := o.(*legion.Node)
		drain := ""
		if n.Status.Drain != nil {
			drain = string(n.Status.Drain.State)
		}
		return []string{n.Metadata.Name, n.Status.Hostname, n.Status.Addr, string(n.Status.State), string(n.Spec.Availability), string(n.Spec.Role),
			platformOf(n.Status.Platform), n.Status.Version, drain, n.Status.Message}
	}},
	legion.KindTask: {cols("NAME", "OWNER", "DESIRED", "STATE", "READY", "NODE", "AGE", "MESSAGE", "+IP", "+IMAGE", "+RESTARTS", "+JAIL"), func(o legion.Object, now time.Time) []string {
		t := o.(*legion.Task)
		return []string{t.Metadata.Name, ownerOf(t), string(t.Spec.DesiredState), string(t.Status.State), taskReady(t), t.Spec.Node,
			age(t.Status.Timestamp, now), t.Message(), t.Status.IP, imagesOf(t.Spec.Pod), fmt.Sprint(t.Status.Restarts), t.Status.PodJail}
	}},
	legion.KindJob: {cols("NAME", "MODE", "COMPLETIONS", "ACTIVE", "FAILED", "STATE", "AGE", "+IMAGE", "+MESSAGE"), func(o legion.Object, now time.Time) []string {
		j := o.(*legion.Job)
		completions := fmt.Sprintf("%d/%d", j.Status.Succeeded, max(j.Spec.Completions, 1))
		if j.Spec.Mode == legion.JobGlobal {
			completions = fmt.Sprint(j.Status.Succeeded)
		}
		return []string{j.Metadata.Name, string(j.Spec.Mode), completions, fmt.Sprint(j.Status.Active), fmt.Sprint(j.Status.Failed),
			string(j.Status.State), agePtr(j.Status.Started, now), imagesOf(j.Spec.Pod), j.Status.Message}
	}},
	legion.KindCronJob: {cols("NAME", "SCHEDULE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "+CONCURRENCY", "+IMAGE", "+MESSAGE"), func(o legion.Object, now time.Time) []string {
		c := o.(*legion.CronJob)
		return []string{c.Metadata.Name, c.Spec.Schedule, fmt.Sprint(c.Spec.Suspend), fmt.Sprint(len(c.Status.Active)), orDash(agePtr(c.Status.LastSchedule, now)),
			string(c.Spec.ConcurrencyPolicy), imagesOf(c.Spec.Job.Pod), c.Status.Message}
	}},
	legion.KindVolume: {cols("NAME", "DRIVER", "SIZE", "NODE", "STATE", "+WANTED ON", "+SOURCE"), func(o legion.Object, _ time.Time) []string {
		v := o.(*legion.Volume)
		return []string{v.Metadata.Name, volumeDriver(v), sizeOf(v), v.Status.Node, volumeState(v), v.Spec.Node, volumeSource(v)}
	}},
	legion.KindRoute: {cols("NAME", "HOST", "PATH", "SERVICE", "PORT", "TLS", "+CERTIFICATE EXPIRES", "+MESSAGE"), func(o legion.Object, _ time.Time) []string {
		r := o.(*legion.Route)
		tls := ""
		if r.Spec.TLS != nil {
			tls = "secret " + r.Spec.TLS.Secret
			if r.Spec.TLS.ACME != nil {
				tls += " (acme)"
			}
		}
		expires := ""
		if r.Status.Expires != nil {
			expires = r.Status.Expires.UTC().Format(time.RFC3339)
		}
		port := ""
		if !r.Spec.Port.IsZero() {
			port = r.Spec.Port.String()
		}
		return []string{r.Metadata.Name, r.Spec.Host, r.Spec.Path, r.Spec.Service, port, tls, expires, r.Status.Message}
	}},
	legion.KindSecret: {cols("NAME", "SIZE", "LABELS"), valueRow},
	legion.KindConfig: {cols("NAME", "SIZE", "LABELS"), valueRow},
	legion.KindNamespace: {cols("NAME", "ISOLATION", "QUOTA", "ALLOW", "+TASKS USED"), func(o legion.Object, _ time.Time) []string {
		n := o.(*legion.Namespace)
		used := ""
		if u := n.Status.Used; u != nil {
			used = fmt.Sprint(u.Tasks)
		}
		return []string{n.Metadata.Name, string(n.Spec.Isolation), quotaString(n.Spec.Quota), strings.Join(n.Spec.Security.Allow, ","), used}
	}},
	legion.KindRoleBinding: {cols("NAME", "USER", "ROLE"), func(o legion.Object, _ time.Time) []string {
		b := o.(*legion.RoleBinding)
		return []string{b.Metadata.Name, b.Spec.User, string(b.Spec.Role)}
	}},
	legion.KindNetworkPolicy: {cols("NAME", "SERVICES", "INGRESS RULES", "EGRESS RULES"), func(o legion.Object, _ time.Time) []string {
		p := o.(*legion.NetworkPolicy)
		egress := "unlimited"
		if p.Spec.Egress != nil {
			egress = fmt.Sprint(len(*p.Spec.Egress))
		}
		services := labelString(p.Spec.Services)
		if len(p.Spec.Services) == 0 {
			services = "all"
		}
		return []string{p.Metadata.Name, services, fmt.Sprint(len(p.Spec.Ingress)), egress}
	}},
	legion.KindImagePolicy: {cols("NAME", "MODE", "REPOSITORIES", "KEYS"), func(o legion.Object, _ time.Time) []string {
		p := o.(*legion.ImagePolicy)
		return []string{p.Metadata.Name, string(p.Spec.Mode), strings.Join(p.Spec.Repositories, ","), fmt.Sprint(len(p.Spec.Keys))}
	}},
}

// valueRow is a Secret's or Config's row: the value's size, never the
// value.
func valueRow(o legion.Object, _ time.Time) []string {
	var spec *legion.SecretSpec
	switch v := o.(type) {
	case *legion.Secret:
		spec = &v.Spec
	case *legion.Config:
		spec = &v.Spec
	}
	size := len(spec.Data)
	if size == 0 {
		size = len(spec.Text)
	}
	return []string{o.GetMetadata().Name, legion.Bytes(size).String(), labelString(o.GetMetadata().Labels)}
}

func platformOf(p legion.Platform) string {
	if p.OS == "" {
		return ""
	}
	return p.OS + "/" + p.Arch
}

func ownerOf(t *legion.Task) string {
	if t.Spec.Owner.Name == "" {
		return ""
	}
	return strings.ToLower(string(t.Spec.Owner.Kind)) + "/" + t.Spec.Owner.Name
}

// taskReady is ready containers of all, as kubectl shows a pod's.
func taskReady(t *legion.Task) string {
	total := len(t.Spec.Pod.Containers)
	ready := 0
	if len(t.Status.Containers) > 0 {
		for _, c := range t.Status.Containers {
			if c.Ready {
				ready++
			}
		}
	} else if t.Status.Ready {
		ready = total
	}
	return fmt.Sprintf("%d/%d", ready, total)
}

func imagesOf(p legion.PodSpec) string {
	var images []string
	for _, c := range p.Containers {
		images = append(images, c.Image)
	}
	return strings.Join(images, ",")
}

func volumeSource(v *legion.Volume) string {
	switch {
	case v.Spec.NFS != nil:
		return v.Spec.NFS.Server + ":" + v.Spec.NFS.Path
	case v.Spec.ISCSI != nil:
		return fmt.Sprintf("%s %s lun %d", v.Spec.ISCSI.Portal, v.Spec.ISCSI.Target, v.Spec.ISCSI.LUN)
	case v.Spec.Plugin != nil:
		return "plugin " + v.Spec.Plugin.Name
	}
	return ""
}

func quotaString(q *legion.Quota) string {
	if q == nil {
		return "none"
	}
	var parts []string
	if q.CPU != nil {
		parts = append(parts, "cpu="+q.CPU.String())
	}
	if q.Memory != nil {
		parts = append(parts, "memory="+q.Memory.String())
	}
	if q.Tasks != nil {
		parts = append(parts, fmt.Sprintf("tasks=%d", *q.Tasks))
	}
	if q.Volumes != nil {
		parts = append(parts, fmt.Sprintf("volumes=%d", *q.Volumes))
	}
	if q.Storage != nil {
		parts = append(parts, "storage="+q.Storage.String())
	}
	if q.Objects != nil {
		parts = append(parts, fmt.Sprintf("objects=%d", *q.Objects))
	}
	return strings.Join(parts, ",")
}

// age is how long ago t was, short as kubectl shows it: seconds under
// two minutes, minutes under three hours, hours under two days, then
// days; nothing for a zero time.
func age(t, now time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := max(now.Sub(t), 0)
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func agePtr(t *time.Time, now time.Time) string {
	if t == nil {
		return ""
	}
	return age(*t, now)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// labelString is labels as a table cell: KEY=VALUE in key order,
// comma-separated, or <none>.
func labelString(l map[string]string) string { return joinLabels(l, ",") }

func joinLabels(l map[string]string, sep string) string {
	if len(l) == 0 {
		return "<none>"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return strings.Join(parts, sep)
}

// watchPrinter prints what a watch sees as it changes: in a table, each
// object's row after an EVENT column (ADDED, MODIFIED, DELETED), the
// header once, later rows padded to the first batch's widths; -o json one
// event per line; -o name the objects' kind/name; templates per object.
type watchPrinter struct {
	w             io.Writer
	f             format
	withNamespace bool
	now           func() time.Time
	widths        []int // of the table's columns, set by the first batch
	// decorate, when set, adds columns to a table (get's -L, --show-labels).
	decorate func(*listing, []legion.Object)
}

// print prints a batch of events of one type: the listing a watch starts
// with (ADDED), or one change.
func (p *watchPrinter) print(typ string, objs []legion.Object) error {
	switch p.f.name {
	case "json":
		for _, o := range objs {
			data, err := json.Marshal(struct {
				Type   string        `json:"type"`
				Object legion.Object `json:"object"`
			}{typ, o})
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "%s\n", data); err != nil {
				return err
			}
		}
		return nil
	case "yaml":
		for _, o := range objs {
			data, err := legion.MarshalYAML(o)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(p.w, "--- # %s\n%s", typ, data); err != nil {
				return err
			}
		}
		return nil
	case "name":
		for _, o := range objs {
			if _, err := fmt.Fprintln(p.w, objectName(o)); err != nil {
				return err
			}
		}
		return nil
	case "go-template", "jsonpath":
		for _, o := range objs {
			data, err := generic(o)
			if err != nil {
				return err
			}
			if err := p.f.execute(p.w, data); err != nil {
				return err
			}
			fmt.Fprintln(p.w)
		}
		return nil
	}
	l := objectListing(objs, p.withNamespace, false, p.now())
	if p.decorate != nil {
		p.decorate(&l, objs)
	}
	head, rows := []string{"EVENT"}, make([][]string, len(l.rows))
	wide := p.f.name == "wide"
	for _, c := range l.columns {
		if wide || !c.wide {
			head = append(head, c.name)
		}
	}
	for i, r := range l.rows {
		rows[i] = []string{typ}
		for j, c := range l.columns {
			if wide || !c.wide {
				rows[i] = append(rows[i], cell(r[j]))
			}
		}
	}
	if p.f.name == "custom-columns" {
		head = []string{"EVENT"}
		for _, c := range p.f.columns {
			head = append(head, c.header)
		}
		for i, o := range objs {
			data, err := generic(o)
			if err != nil {
				return err
			}
			rows[i] = []string{typ}
			for _, c := range p.f.columns {
				var b bytes.Buffer
				if err := c.path.Execute(&b, data); err != nil {
					return fmt.Errorf("-o custom-columns: column %s: %w", c.header, err)
				}
				rows[i] = append(rows[i], cell(b.String()))
			}
		}
	}
	if p.widths == nil {
		p.widths = make([]int, len(head))
		p.widths[0] = len(client.Modified) // the longest event

		for _, r := range append([][]string{head}, rows...) {
			for i, c := range r {
				p.widths[i] = max(p.widths[i], utf8.RuneCountInString(c))
			}
		}
		if !p.f.noHeaders {
			if err := p.line(head); err != nil {
				return err
			}
		}
	}
	for _, r := range rows {
		if err := p.line(r); err != nil {
			return err
		}
	}
	return nil
}

// line writes cells padded to the first batch's widths, two spaces apart.
func (p *watchPrinter) line(cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		b.WriteString(c)
		if i < len(cells)-1 {
			b.WriteString(strings.Repeat(" ", max(p.widths[i]-utf8.RuneCountInString(c), 0)+2))
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(p.w, b.String())
	return err
}

// diffView is what diff compares of an object: its labels and spec, as
// YAML.
func diffView(o legion.Object) ([]byte, error) {
	spec, err := json.Marshal(o.SpecPtr())
	if err != nil {
		return nil, err
	}
	var specAny any
	if err := json.Unmarshal(spec, &specAny); err != nil {
		return nil, err
	}
	// A Config of text diffs as its text, line by line, not as base64 in
	// one line that says nothing of what changed.
	if c, ok := o.(*legion.Config); ok && utf8.Valid(c.Spec.Data) && !bytes.ContainsRune(c.Spec.Data, 0) {
		specAny = map[string]any{"text": string(c.Spec.Data)}
	}
	labels := map[string]string{}
	maps.Copy(labels, o.GetMetadata().Labels)
	return yaml.Marshal(map[string]any{"labels": labels, "spec": specAny})
}

// volumeDriver is a Volume's driver, and for a zfs one that its node
// keeps as a plain directory (a process-platform node: no snapshots, no
// size held to), that it is one.
func volumeDriver(v *legion.Volume) string {
	if v.Spec.Driver == legion.DriverZFS && strings.HasPrefix(v.Status.Backend, "directory") {
		return string(v.Spec.Driver) + " (a directory)"
	}
	return string(v.Spec.Driver)
}
