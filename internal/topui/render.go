package topui

import (
	"fmt"
	"sort"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/legionbsd/legion"
)

// headerLines is how many lines the header takes.
const headerLines = 3

// graphWidth is how many columns the header's graph spans.
const graphWidth = 40

type styles struct {
	title, activeTab, tab, selected, dim, warn lipgloss.Style
	level                                      func(share float64) lipgloss.Style
}

func newStyles(color bool) styles {
	plain := lipgloss.NewStyle()
	if !color {
		return styles{title: plain, activeTab: plain, tab: plain, selected: plain, dim: plain, warn: plain,
			level: func(float64) lipgloss.Style { return plain }}
	}
	return styles{
		title:     lipgloss.NewStyle().Bold(true),
		activeTab: lipgloss.NewStyle().Bold(true).Foreground(lipgloss.Color("15")).Background(lipgloss.Color("4")),
		tab:       lipgloss.NewStyle().Foreground(lipgloss.Color("7")),
		selected:  lipgloss.NewStyle().Reverse(true),
		dim:       lipgloss.NewStyle().Foreground(lipgloss.Color("8")),
		warn:      lipgloss.NewStyle().Foreground(lipgloss.Color("3")),
		// As jmon colours its bars: green, then yellow, then red.
		level: func(share float64) lipgloss.Style {
			switch {
			case share >= 0.9:
				return lipgloss.NewStyle().Foreground(lipgloss.Color("1"))
			case share >= 0.7:
				return lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
			}
			return lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
		},
	}
}

// counts says how many of each state, most first, as "2 ready, 1 down".
func counts(states []string) string {
	n := map[string]int{}
	for _, s := range states {
		if s == "" {
			s = "unknown"
		}
		n[s]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if n[keys[i]] != n[keys[j]] {
			return n[keys[i]] > n[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%d %s", n[k], k)
	}
	return strings.Join(parts, ", ")
}

// summary is the header's first line: nodes and tasks by state, managers.
func summary(d *Data) string {
	var ns, ts []string
	nodes := d.Objects[legion.KindNode]
	for _, o := range nodes {
		ns = append(ns, string(o.(*legion.Node).Status.State))
	}
	tasks := d.Objects[legion.KindTask]
	for _, o := range tasks {
		ts = append(ts, string(o.(*legion.Task).Status.State))
	}
	// A kind the caller may not list is not a count of none.
	line := "nodes not listed"
	if _, denied := d.Denied[legion.KindNode]; !denied {
		line = fmt.Sprintf("nodes %d", len(nodes))
		if len(ns) > 0 {
			line += " (" + counts(ns) + ")"
		}
	}
	if _, denied := d.Denied[legion.KindTask]; denied {
		line += "   tasks not listed"
	} else {
		line += fmt.Sprintf("   tasks %d", len(tasks))
		if len(ts) > 0 {
			line += " (" + counts(ts) + ")"
		}
	}
	if len(d.Managers) > 0 {
		var ms []string
		for _, m := range d.Managers {
			s := m.Name
			if m.Leader {
				s += "*"
			} else if m.State != "" && m.State != "Reachable" {
				s += " (" + strings.ToLower(m.State) + ")"
			}
			ms = append(ms, s)
		}
		line += "   managers " + strings.Join(ms, " ")
	}
	return line
}

// spark draws the samples of the last graphSpan, one column per slice of
// time, scaled to their peak but never below graphFloor of what the nodes
// can allocate.
func spark(samples []sample, value func(sample) int64, allocatable int64) (string, int64) {
	if len(samples) == 0 {
		return "", 0
	}
	now := samples[len(samples)-1].at
	cols := make([]int64, graphWidth)
	seen := make([]bool, graphWidth)
	var peak int64
	for _, s := range samples {
		i := int(int64(s.at.Sub(now.Add(-graphSpan))) * graphWidth / int64(graphSpan))
		i = min(max(i, 0), graphWidth-1)
		v := value(s)
		cols[i], seen[i] = max(cols[i], v), true
		peak = max(peak, v)
	}
	scale := max(peak, int64(float64(allocatable)*graphFloor), 1)
	levels := []rune("▁▂▃▄▅▆▇█")
	var b strings.Builder
	for i, v := range cols {
		if !seen[i] {
			b.WriteRune(' ')
			continue
		}
		b.WriteRune(levels[min(int(v*int64(len(levels)-1)/scale), len(levels)-1)])
	}
	return b.String(), peak
}

// meter is a header line: the bar of what all tasks use against what the
// nodes can allocate, the amounts, and (when graph) the 20-minute graph.
func (m *Model) meter(st styles, name string, used, of int64, format func(int64) string, value func(sample) int64, graph bool) string {
	share := 0.0
	if of > 0 {
		share = float64(used) / float64(of)
	}
	const width = 24
	line := fmt.Sprintf("%-6s %s %s of %s", name, st.level(share).Render(bar(used, of, width)), format(used), format(of))
	if graph {
		g, peak := spark(m.samples, value, of)
		line += fmt.Sprintf("   %s peak %s (20m)", st.level(share).Render(g), format(peak))
	}
	return line
}

func (m *Model) header(st styles, graph bool) string {
	if _, denied := m.data.Denied[legion.KindNode]; denied {
		// Use and capacity are the nodes': none to add up.
		return st.title.Render("legion top") + "   " + summary(&m.data) + "\n" +
			fmt.Sprintf("%-6s not known: nodes not listed\n%-6s not known: nodes not listed", "CPU", "MEMORY")
	}
	t := m.data.totals()
	cpu := m.meter(st, "CPU", int64(t.CPU), int64(t.CPUAllocatable), func(v int64) string { return FormatCPU(legion.CPU(v)) },
		func(s sample) int64 { return int64(s.cpu) }, graph)
	mem := m.meter(st, "MEMORY", int64(t.Memory), int64(t.MemoryAllocatable), func(v int64) string { return FormatBytes(legion.Bytes(v)) },
		func(s sample) int64 { return int64(s.memory) }, graph)
	return st.title.Render("legion top") + "   " + summary(&m.data) + "\n" + cpu + "\n" + mem
}

func (m *Model) tabs(st styles) string {
	parts := make([]string, len(views))
	for i, v := range views {
		label := fmt.Sprintf(" %d %s ", i+1, v.name)
		if i == m.tab {
			if m.color {
				parts[i] = st.activeTab.Render(label)
			} else {
				parts[i] = "[" + strings.TrimSpace(label) + "]"
			}
		} else {
			parts[i] = st.tab.Render(label)
		}
	}
	return strings.Join(parts, " ")
}

// table lays rows out under columns; the row at cursor (-1: none) is
// marked. Only rows [from, to) are drawn.
func table(st styles, columns []string, rows []Row, cursor, from, to, width int) []string {
	widths := make([]int, len(columns))
	for i, c := range columns {
		widths[i] = ansi.StringWidth(c)
	}
	for _, r := range rows {
		for i, c := range r.Cells {
			widths[i] = max(widths[i], ansi.StringWidth(c))
		}
	}
	line := func(cells []string) string {
		var b strings.Builder
		for i, c := range cells {
			if i == len(cells)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c + strings.Repeat(" ", widths[i]-ansi.StringWidth(c)+2))
		}
		return ansi.Truncate(b.String(), max(width-2, 10), "…")
	}
	out := []string{"  " + line(columns)}
	for i := from; i < to && i < len(rows); i++ {
		if i == cursor {
			out = append(out, st.selected.Render("> "+line(rows[i].Cells)))
		} else {
			out = append(out, "  "+line(rows[i].Cells))
		}
	}
	return out
}

// notes say what a tab could not show: kinds not listed, views not read.
func (m *Model) notes(v view) []string {
	var out []string
	for _, k := range v.kinds {
		if why, ok := m.data.Denied[k]; ok {
			out = append(out, fmt.Sprintf("%s: not listed: %s", strings.ToLower(k.Plural()), why))
		}
	}
	if why, ok := m.data.Note[v.name]; ok {
		out = append(out, v.name+": "+why)
	}
	return out
}

// help is the footer: the keys of the tab shown.
func (m *Model) help() string {
	keys := "q quit  ←/→ tabs  / filter  ↑/↓ select"
	switch views[m.tab].name {
	case "nodes":
		keys += "  enter tasks  y yaml  d drain  p pause  a activate"
	case "workloads":
		keys += "  enter tasks  y yaml  +/- scale  r rollback  R restart  s/u suspend/resume  x delete"
	case "tasks":
		keys += "  l logs  y yaml  x delete"
	case "storage", "network", "config":
		keys += "  y yaml  x delete"
	}
	if m.logs != nil {
		keys += "  esc close pane  pgup/pgdn scroll  z zoom"
	}
	return keys
}

// View implements tea.Model.
func (m Model) View() string {
	if m.quitting {
		return "" // leave a blank screen behind
	}
	st := newStyles(m.color)
	lines := strings.Split(m.header(st, true), "\n")
	lines = append(lines, m.tabs(st))
	v := views[m.tab]
	rows := m.rows()
	notes := m.notes(v)
	logLines := 0
	if m.logs != nil {
		logLines = m.logHeight() + 1
	}
	// Room for the table's rows: what the header, tabs, table header,
	// notes, log pane, status and help leave.
	room := m.height - len(lines) - 1 - len(notes) - logLines - 2
	if m.zoom {
		room = 0
	}
	room = max(room, 0)
	from := 0
	if m.cursor >= room {
		from = m.cursor - room + 1
	}
	if !m.zoom {
		lines = append(lines, table(st, v.columns, rows, m.cursor, from, from+room, m.width)...)
		for i := len(rows) - from; i < room; i++ {
			lines = append(lines, "")
		}
		for _, n := range notes {
			lines = append(lines, st.warn.Render(n))
		}
	}
	if m.logs != nil {
		title := "logs " + m.logs.title
		if m.logs.err != nil {
			title += " (" + m.logs.err.Error() + ")"
		}
		lines = append(lines, st.title.Render(title), m.logs.vp.View())
	}
	switch {
	case m.ask != nil:
		lines = append(lines, m.ask.prompt+m.ask.typed)
	case m.editing:
		lines = append(lines, m.filter.View())
	case m.filter.Value() != "":
		lines = append(lines, "/"+m.filter.Value()+"   "+m.status)
	default:
		lines = append(lines, m.status)
	}
	lines = append(lines, st.dim.Render(m.help()))
	return strings.Join(lines, "\n")
}

// Once is every view as plain text, for legion top --once: the header
// without its graph (one reading has no history) and each tab's rows.
func Once(d Data, width int) string {
	m := New(nil, false).SetData(d)
	m.width = width
	st := newStyles(false)
	var b strings.Builder
	b.WriteString(m.header(st, false) + "\n")
	for i, v := range views {
		m.tab = i
		rows := m.rows()
		fmt.Fprintf(&b, "\n%s (%d)\n", strings.ToUpper(v.name), len(rows))
		for _, l := range table(st, v.columns, rows, -1, 0, len(rows), width) {
			b.WriteString(strings.TrimRight(l, " ") + "\n")
		}
		for _, n := range m.notes(v) {
			b.WriteString(n + "\n")
		}
	}
	return b.String()
}
