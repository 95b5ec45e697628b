package topui

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/cursor"
	"github.com/charmbracelet/bubbles/textinput"
	"github.com/charmbracelet/bubbles/viewport"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/legionbsd/legion"
)

// Action is something done to a row, through the calls the CLI makes.
type Action struct {
	Verb      string // drain, pause, activate, scale, rollback, restart, suspend, resume, delete
	Kind      legion.Kind
	Namespace string
	Name      string
	Replicas  int // scale: by how many (+1 or -1)
}

func (a Action) String() string {
	if a.Namespace == "" {
		return fmt.Sprintf("%s %s/%s", a.Verb, strings.ToLower(string(a.Kind)), a.Name)
	}
	return fmt.Sprintf("%s %s/%s/%s", a.Verb, strings.ToLower(string(a.Kind)), a.Namespace, a.Name)
}

// Backend is what the UI asks of the cluster.
type Backend interface {
	// Do carries an action out and says what it did.
	Do(ctx context.Context, a Action) (string, error)
	// Logs follows a task's log (of container, when given), a line at
	// a time, until ctx ends.
	Logs(ctx context.Context, namespace, task, container string, line func(string)) error
}

// Messages the program sends the model.
type (
	// DataMsg is a new reading of the cluster.
	DataMsg Data
	// logMsg is a line of the open log pane's task (seq tells panes apart).
	logMsg struct {
		seq  int
		line string
		more <-chan string
	}
	logEndMsg struct {
		seq int
		err error
	}
	// doneMsg is how an action went.
	doneMsg struct {
		text string
		err  error
	}
)

// question is a confirmation asked before an action: answered by y, or
// by typing want when it is set.
type question struct {
	prompt  string
	want    string
	choices []string // the answer is typed: one of these
	typed   string
	action  Action
}

// logPane follows one task's log under the table.
type logPane struct {
	title  string
	seq    int
	lines  []string
	err    error
	cancel context.CancelFunc
	vp     viewport.Model
	follow bool // keep the newest line in view
}

// maxLogLines bounds what the pane keeps.
const maxLogLines = 5000

// Model is legion top's state. It is a value: Update returns the next one.
type Model struct {
	data     Data
	backend  Backend
	color    bool
	width    int
	height   int
	tab      int
	cursor   int
	filter   textinput.Model
	editing  bool // the filter has the keys
	ask      *question
	logs     *logPane
	zoom     bool // the log pane is laid over the table
	status   string
	samples  []sample
	logSeq   int
	quitting bool
}

// New makes the model; color false draws without colours (NO_COLOR).
func New(b Backend, color bool) Model {
	f := textinput.New()
	f.Prompt = "/"
	f.Cursor.SetMode(cursor.CursorStatic)
	return Model{backend: b, color: color, filter: f, width: 120, height: 40}
}

// Init implements tea.Model: the program feeds the data.
func (m Model) Init() tea.Cmd { return nil }

// SetData records a reading and a sample of the header's graph.
func (m Model) SetData(d Data) Model {
	m.data = d
	t := d.totals()
	m.samples = append(m.samples, sample{at: d.Now, cpu: t.CPU, memory: t.Memory})
	for len(m.samples) > 0 && d.Now.Sub(m.samples[0].at) > graphSpan {
		m.samples = m.samples[1:]
	}
	m.clampCursor()
	return m
}

// rows are the current tab's rows that pass the filter.
func (m *Model) rows() []Row {
	all := views[m.tab].rows(&m.data)
	f := strings.ToLower(m.filter.Value())
	if f == "" {
		return all
	}
	var out []Row
	for _, r := range all {
		if strings.Contains(strings.ToLower(strings.Join(r.Cells, " ")), f) {
			out = append(out, r)
		}
	}
	return out
}

func (m *Model) clampCursor() {
	n := len(m.rows())
	if m.cursor >= n {
		m.cursor = n - 1
	}
	if m.cursor < 0 {
		m.cursor = 0
	}
}

func (m *Model) selected() (Row, bool) {
	rows := m.rows()
	if m.cursor < len(rows) {
		return rows[m.cursor], true
	}
	return Row{}, false
}

// Update implements tea.Model.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case DataMsg:
		return m.SetData(Data(msg)), nil
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.sizeLogs()
		return m, nil
	case logMsg:
		if m.logs == nil || msg.seq != m.logs.seq {
			return m, nil
		}
		m.logs.lines = append(m.logs.lines, clean(msg.line))
		if len(m.logs.lines) > maxLogLines {
			m.logs.lines = m.logs.lines[len(m.logs.lines)-maxLogLines:]
		}
		m.logs.vp.SetContent(strings.Join(m.logs.lines, "\n"))
		if m.logs.follow {
			m.logs.vp.GotoBottom()
		}
		return m, waitLog(msg.seq, msg.more)
	case logEndMsg:
		if m.logs != nil && msg.seq == m.logs.seq {
			m.logs.err = msg.err
			if msg.err == nil {
				m.logs.err = errLogEnded
			}
		}
		return m, nil
	case doneMsg:
		if msg.err != nil {
			m.status = "error: " + msg.err.Error()
		} else {
			m.status = msg.text
		}
		return m, nil
	case tea.KeyMsg:
		if msg.Type == tea.KeyRunes && len(msg.Runes) > 1 && !msg.Paste {
			// Keys typed faster than read arrive together: each acts.
			var cmds []tea.Cmd
			var next tea.Model = m
			for _, r := range msg.Runes {
				var cmd tea.Cmd
				next, cmd = next.(Model).key(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune{r}})
				cmds = append(cmds, cmd)
			}
			return next, tea.Batch(cmds...)
		}
		return m.key(msg)
	}
	return m, nil
}

var errLogEnded = fmt.Errorf("the log ended")

func (m Model) key(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	s := k.String()
	if s == "ctrl+c" {
		return m.quit()
	}
	if m.ask != nil {
		return m.answer(k)
	}
	if m.editing {
		switch s {
		case "enter":
			m.editing = false
			m.filter.Blur()
		case "esc":
			m.editing = false
			m.filter.Blur()
			m.filter.SetValue("")
		default:
			var cmd tea.Cmd
			m.filter, cmd = m.filter.Update(k)
			m.cursor = 0
			return m, cmd
		}
		m.clampCursor()
		return m, nil
	}
	if m.logs != nil {
		switch s {
		case "esc":
			m.closeLogs()
			return m, nil
		case "pgup":
			m.logs.vp.PageUp()
			m.logs.follow = false
			return m, nil
		case "pgdown":
			m.logs.vp.PageDown()
			m.logs.follow = m.logs.vp.AtBottom()
			return m, nil
		case "z":
			m.zoom = !m.zoom
			m.sizeLogs()
			return m, nil
		}
	}
	switch s {
	case "q":
		return m.quit()
	case "esc":
		m.filter.SetValue("")
		m.clampCursor()
	case "tab", "right":
		m.switchTab((m.tab + 1) % len(views))
	case "shift+tab", "left":
		m.switchTab((m.tab + len(views) - 1) % len(views))
	case "1", "2", "3", "4", "5", "6", "7":
		m.switchTab(int(s[0] - '1'))
	case "up", "k":
		if m.cursor > 0 {
			m.cursor--
		}
	case "down", "j":
		m.cursor++
		m.clampCursor()
	case "home", "g":
		m.cursor = 0
	case "end", "G":
		m.cursor = len(m.rows()) - 1
		m.clampCursor()
	case "/":
		m.editing = true
		return m, m.filter.Focus()
	case "enter":
		r, ok := m.selected()
		if ok && (r.Kind == legion.KindNode || r.Kind == legion.KindService || r.Kind == legion.KindJob) && views[m.tab].name != "events" {
			// A node's or workload's tasks: the tasks tab, filtered to it.
			m.switchTab(tabIndex("tasks"))
			if r.Kind == legion.KindNode {
				m.filter.SetValue(r.Name)
			} else {
				m.filter.SetValue(r.Name + "-")
			}
		}
	case "l":
		return m.openLogs()
	case "y":
		m.openYAML()
	default:
		return m.act(s)
	}
	return m, nil
}

func tabIndex(name string) int {
	for i, v := range views {
		if v.name == name {
			return i
		}
	}
	return 0
}

func (m *Model) switchTab(i int) {
	if i < 0 || i >= len(views) {
		return
	}
	m.tab, m.cursor = i, 0
	m.filter.SetValue("")
}

func (m Model) quit() (tea.Model, tea.Cmd) {
	m.closeLogs()
	m.quitting = true
	return m, tea.Quit
}

// act maps a key to an action on the selected row, asking first where
// the action is hard to undo.
func (m Model) act(s string) (tea.Model, tea.Cmd) {
	r, ok := m.selected()
	if !ok || views[m.tab].name == "events" {
		return m, nil
	}
	a := Action{Kind: r.Kind, Namespace: r.Namespace, Name: r.Name}
	switch {
	case r.Kind == legion.KindNode && s == "d":
		a.Verb = "drain"
		m.ask = &question{prompt: fmt.Sprintf("drain node %s, moving its tasks elsewhere? (y/n)", r.Name), action: a}
		return m, nil
	case r.Kind == legion.KindNode && s == "p":
		a.Verb = "pause"
	case r.Kind == legion.KindNode && s == "a":
		a.Verb = "activate"
	case r.Kind == legion.KindService && (s == "+" || s == "-"):
		a.Verb, a.Replicas = "scale", 1
		if s == "-" {
			a.Replicas = -1
		}
	case r.Kind == legion.KindService && s == "r":
		a.Verb = "rollback"
		m.ask = &question{prompt: fmt.Sprintf("roll service %s/%s back to its previous spec? (y/n)", r.Namespace, r.Name), action: a}
		return m, nil
	case r.Kind == legion.KindService && s == "R":
		a.Verb = "restart"
		m.ask = &question{prompt: fmt.Sprintf("restart service %s/%s, replacing its tasks in a rolling update? (y/n)", r.Namespace, r.Name), action: a}
		return m, nil
	case r.Kind == legion.KindCronJob && s == "s":
		a.Verb = "suspend"
	case r.Kind == legion.KindCronJob && s == "u":
		a.Verb = "resume"
	case s == "x" && r.Kind == legion.KindTask:
		a.Verb = "delete"
		m.ask = &question{prompt: fmt.Sprintf("delete task %s/%s (its owner starts another)? (y/n)", r.Namespace, r.Name), action: a}
		return m, nil
	case s == "x" && r.Kind != legion.KindNode:
		a.Verb = "delete"
		m.ask = &question{prompt: fmt.Sprintf("delete %s %s: type its name to confirm: ", strings.ToLower(string(r.Kind)), r.Name), want: r.Name, action: a}
		return m, nil
	default:
		return m, nil
	}
	return m, m.do(a)
}

func (m Model) answer(k tea.KeyMsg) (tea.Model, tea.Cmd) {
	q := m.ask
	switch s := k.String(); {
	case s == "esc":
		m.ask, m.status = nil, "cancelled"
	case q.choices != nil && s == "enter":
		m.ask = nil
		if !slices.Contains(q.choices, q.typed) {
			m.status = fmt.Sprintf("cancelled: no container %q", q.typed)
			return m, nil
		}
		return m.followLogs(q.action.Namespace, q.action.Name, q.typed)
	case q.choices != nil && s == "backspace":
		if q.typed != "" {
			nq := *q
			nq.typed = q.typed[:len(q.typed)-1]
			m.ask = &nq
		}
	case q.choices != nil && k.Type == tea.KeyRunes:
		nq := *q
		nq.typed += string(k.Runes)
		m.ask = &nq
	case q.want == "" && (s == "y" || s == "Y"):
		m.ask = nil
		return m, m.do(q.action)
	case q.want == "":
		m.ask, m.status = nil, "cancelled"
	case s == "enter":
		m.ask = nil
		if q.typed != q.want {
			m.status = fmt.Sprintf("cancelled: %q is not %q", q.typed, q.want)
			return m, nil
		}
		return m, m.do(q.action)
	case s == "backspace":
		if q.typed != "" {
			nq := *q
			nq.typed = q.typed[:len(q.typed)-1]
			m.ask = &nq
		}
	case k.Type == tea.KeyRunes:
		nq := *q
		nq.typed += string(k.Runes)
		m.ask = &nq
	}
	return m, nil
}

func (m *Model) do(a Action) tea.Cmd {
	m.status = a.String() + "..."
	b := m.backend
	return func() tea.Msg {
		ctx, cancel := context.WithTimeout(context.Background(), actionTimeout)
		defer cancel()
		text, err := b.Do(ctx, a)
		if err != nil {
			err = fmt.Errorf("%s: %w", a, err)
		}
		return doneMsg{text: text, err: err}
	}
}

// actionTimeout bounds one action's calls.
const actionTimeout = 30 * time.Second

// openLogs follows the selected task's log, asking first which
// container when its pod has several.
func (m Model) openLogs() (tea.Model, tea.Cmd) {
	r, ok := m.selected()
	if !ok || r.Kind != legion.KindTask || views[m.tab].name != "tasks" {
		return m, nil
	}
	var names []string
	for _, o := range m.data.Objects[legion.KindTask] {
		if t, ok := o.(*legion.Task); ok && t.Metadata.Namespace == r.Namespace && t.Metadata.Name == r.Name {
			for _, c := range t.Spec.Pod.Containers {
				names = append(names, c.Name)
			}
		}
	}
	if len(names) > 1 {
		m.ask = &question{prompt: fmt.Sprintf("logs of which container (%s)? ", strings.Join(names, ", ")), choices: names,
			action: Action{Verb: "logs", Kind: legion.KindTask, Namespace: r.Namespace, Name: r.Name}}
		return m, nil
	}
	return m.followLogs(r.Namespace, r.Name, "")
}

func (m Model) followLogs(ns, name, container string) (tea.Model, tea.Cmd) {
	m.closeLogs()
	m.logSeq++
	ctx, cancel := context.WithCancel(context.Background())
	title := ns + "/" + name
	if container != "" {
		title += " " + container
	}
	m.logs = &logPane{title: title, seq: m.logSeq, cancel: cancel, vp: viewport.New(m.width, 1), follow: true}
	m.sizeLogs()
	lines := make(chan string, 256)
	b, seq := m.backend, m.logSeq
	start := func() tea.Msg {
		done := make(chan error, 1)
		go func() {
			done <- b.Logs(ctx, ns, name, container, func(l string) {
				select {
				case lines <- l:
				case <-ctx.Done():
				}
			})
			close(lines)
		}()
		l, ok := <-lines
		if !ok {
			return logEndMsg{seq: seq, err: <-done}
		}
		return logMsg{seq: seq, line: l, more: lines}
	}
	return m, start
}

// openYAML shows the selected object as YAML in the pane (a Secret's
// value was dropped on arrival, so it never shows).
func (m *Model) openYAML() {
	r, ok := m.selected()
	if !ok || views[m.tab].name == "events" {
		return
	}
	for _, o := range m.data.Objects[r.Kind] {
		if md := o.GetMetadata(); md.Namespace != r.Namespace || md.Name != r.Name {
			continue
		}
		m.closeLogs()
		m.logSeq++
		text, err := legion.MarshalYAML(o)
		if err != nil {
			text = []byte(err.Error())
		}
		m.logs = &logPane{title: strings.ToLower(string(r.Kind)) + " " + legion.DisplayName(o) + " as YAML", seq: m.logSeq,
			cancel: func() {}, vp: viewport.New(m.width, 1), lines: strings.Split(strings.TrimRight(string(text), "\n"), "\n")}
		m.sizeLogs()
		m.logs.vp.SetContent(strings.Join(m.logs.lines, "\n"))
		return
	}
}

func waitLog(seq int, more <-chan string) tea.Cmd {
	return func() tea.Msg {
		l, ok := <-more
		if !ok {
			return logEndMsg{seq: seq}
		}
		return logMsg{seq: seq, line: l, more: more}
	}
}

func (m *Model) closeLogs() {
	if m.logs != nil {
		m.logs.cancel()
		m.logs = nil
		m.zoom = false
	}
}

// logHeight is the pane's share of the screen below the header.
func (m *Model) logHeight() int {
	if m.zoom {
		return max(m.height-headerLines-4, 3)
	}
	return max((m.height-headerLines)/3, 3)
}

func (m *Model) sizeLogs() {
	if m.logs == nil {
		return
	}
	m.logs.vp.Width, m.logs.vp.Height = m.width, m.logHeight()
	if m.logs.follow {
		m.logs.vp.GotoBottom()
	}
}

// clean drops colour codes and other control characters from a log line.
func clean(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == 0x1b:
			// An escape sequence: CSI (ESC [ ... final byte) or two bytes.
			if i+1 < len(s) && s[i+1] == '[' {
				i += 2
				for i < len(s) && (s[i] < 0x40 || s[i] > 0x7e) {
					i++
				}
			} else {
				i++
			}
		case c == '\t':
			b.WriteString("    ")
		case c < 0x20 || c == 0x7f:
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// logsPending reports whether a log pane is open (tests read its first
// lines through it).
func (m Model) logsPending() (string, bool) {
	if m.logs == nil {
		return "", false
	}
	return m.logs.title, true
}
