package topui

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/legionbsd/legion"
)

// fakeBackend records actions and serves a fixed log.
type fakeBackend struct {
	mu   sync.Mutex
	done []Action
	logs map[string][]string
}

func (f *fakeBackend) Do(_ context.Context, a Action) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = append(f.done, a)
	if a.Name == "broken" {
		return "", errors.New("refused")
	}
	return a.String() + ": done", nil
}

func (f *fakeBackend) Logs(ctx context.Context, ns, task, container string, line func(string)) error {
	key := ns + "/" + task
	if container != "" {
		key += "/" + container
	}
	for _, l := range f.logs[key] {
		line(l)
	}
	<-ctx.Done()
	return nil
}

func (f *fakeBackend) actions() []Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Action(nil), f.done...)
}

// driver feeds a model keys and runs the commands they return, feeding
// their messages back (a log follow is read n lines deep).
type driver struct {
	t        *testing.T
	m        Model
	logLines int // how many lines the fake log has: reading more would wait for ever
}

func newDriver(t *testing.T, b Backend) *driver {
	m := New(b, false)
	next, _ := m.Update(tea.WindowSizeMsg{Width: 160, Height: 48})
	m = next.(Model)
	return &driver{t: t, m: m.SetData(fixture(t))}
}

func (d *driver) run(cmd tea.Cmd, depth int) {
	for cmd != nil && depth > 0 {
		msg := cmd()
		if _, quit := msg.(tea.QuitMsg); quit {
			return
		}
		var next tea.Model
		next, cmd = d.m.Update(msg)
		d.m = next.(Model)
		depth--
	}
}

func (d *driver) keys(ks ...string) {
	for _, k := range ks {
		var msg tea.KeyMsg
		switch k {
		case "enter":
			msg = tea.KeyMsg{Type: tea.KeyEnter}
		case "esc":
			msg = tea.KeyMsg{Type: tea.KeyEscape}
		case "tab":
			msg = tea.KeyMsg{Type: tea.KeyTab}
		case "down":
			msg = tea.KeyMsg{Type: tea.KeyDown}
		case "backspace":
			msg = tea.KeyMsg{Type: tea.KeyBackspace}
		default:
			msg = tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
		}
		next, cmd := d.m.Update(msg)
		d.m = next.(Model)
		if _, isLog := d.m.logsPending(); isLog && (k == "l" || d.m.logs.lines == nil && k == "enter") {
			d.run(cmd, d.logLines) // the lines of a log just opened
		} else {
			d.run(cmd, 1)
		}
	}
}

func (d *driver) shows(want ...string) {
	d.t.Helper()
	v := d.m.View()
	for _, w := range want {
		if !strings.Contains(v, w) {
			d.t.Errorf("the screen does not show %q:\n%s", w, v)
		}
	}
}

func (d *driver) hides(not ...string) {
	d.t.Helper()
	v := d.m.View()
	for _, w := range not {
		if strings.Contains(v, w) {
			d.t.Errorf("the screen shows %q:\n%s", w, v)
		}
	}
}

func TestTabsSwitchAndFilter(t *testing.T) {
	t.Parallel()
	d := newDriver(t, &fakeBackend{})
	d.shows("[1 nodes]", "alpha", "beta", "gamma", "legion top", "nodes 3 (2 ready, 1 down)", "peak")
	d.keys("tab")
	d.shows("[2 workloads]", "nightly", "migrate", "web")
	d.keys("3")
	d.shows("[3 tasks]", "web-1", "web-2", "migrate-1")
	d.keys("/", "w", "e", "b", "-", "2", "enter")
	d.shows("/web-2", "web-2")
	d.hides("web-1", "migrate-1")
	d.keys("esc")
	d.shows("web-1", "migrate-1")
	// Enter on a node lists its tasks.
	d.keys("1", "down", "enter")
	d.shows("[3 tasks]", "/beta", "web-2")
	d.hides("web-1")
}

func TestLogsPaneOpensAndCloses(t *testing.T) {
	t.Parallel()
	b := &fakeBackend{logs: map[string][]string{"shop/web-1": {"listening on :8080", "\x1b[31mGET / 200\x1b[0m", "bell\a here"}}}
	d := newDriver(t, b)
	d.logLines = 3
	d.keys("3", "/", "w", "e", "b", "-", "1", "enter", "l")
	d.shows("logs shop/web-1", "listening on :8080", "GET / 200", "bell here", "esc close pane")
	d.hides("\x1b[31m", "\a")
	d.keys("z")
	d.hides("NAMESPACE  NAME")
	d.keys("esc")
	d.hides("logs shop/web-1", "listening on")
	d.shows("NAMESPACE")
}

func TestActionsAskFirst(t *testing.T) {
	t.Parallel()
	b := &fakeBackend{}
	d := newDriver(t, b)
	// Drain asks; n cancels, y drains.
	d.keys("down", "d")
	d.shows("drain node beta")
	d.keys("n")
	d.shows("cancelled")
	if a := b.actions(); len(a) != 0 {
		t.Fatalf("acted without a yes: %v", a)
	}
	d.keys("d", "y")
	d.shows("drain node/beta: done")
	// Scale acts at once; delete wants the name typed.
	d.keys("2", "/", "s", "h", "o", "p", " ", "w", "e", "b", "enter", "+")
	d.keys("x", "w", "e", "enter")
	d.shows(`cancelled: "we" is not "web"`)
	// Restart asks.
	d.keys("R")
	d.shows("restart service shop/web, replacing its tasks in a rolling update? (y/n)")
	d.keys("y")
	d.keys("x", "w", "e", "b", "enter")
	want := []Action{{Verb: "drain", Kind: legion.KindNode, Name: "beta"},
		{Verb: "scale", Kind: legion.KindService, Namespace: "shop", Name: "web", Replicas: 1},
		{Verb: "restart", Kind: legion.KindService, Namespace: "shop", Name: "web"},
		{Verb: "delete", Kind: legion.KindService, Namespace: "shop", Name: "web"}}
	got := b.actions()
	if len(got) != len(want) {
		t.Fatalf("actions %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("action %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func TestGraphKeepsTwentyMinutes(t *testing.T) {
	t.Parallel()
	m := New(nil, false)
	d := fixture(t)
	start := d.Now
	for i := range 30 {
		d.Now = start.Add(time.Duration(i) * time.Minute)
		m = m.SetData(d)
	}
	if n := len(m.samples); n != 21 {
		t.Errorf("%d samples kept over 30 minutes of one a minute, want the last 21 (20 minutes)", n)
	}
	g, peak := spark(m.samples, func(s sample) int64 { return int64(s.cpu) }, 13500)
	if peak != 2370 || !strings.Contains(g, "█") {
		t.Errorf("graph %q peak %d, want a flat top at 2370", g, peak)
	}
}

func TestNoColorDrawsNoEscapes(t *testing.T) {
	t.Parallel()
	d := newDriver(t, &fakeBackend{})
	if v := d.m.View(); strings.Contains(v, "\x1b[") {
		t.Errorf("NO_COLOR view holds escape codes:\n%q", v)
	}
}

// Keys that arrive together in one read each act, as typed one by one.
func TestKeysReadTogetherEachAct(t *testing.T) {
	t.Parallel()
	d := newDriver(t, &fakeBackend{})
	next, _ := d.m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("3/web-2")})
	d.m = next.(Model)
	d.keys("enter")
	d.shows("[3 tasks]", "/web-2", "web-2")
	d.hides("web-1", "migrate-1")
}

// y shows the selected object as YAML in the pane; a Secret's value is
// not there, as it was dropped on arrival.
func TestYAMLPane(t *testing.T) {
	t.Parallel()
	d := newDriver(t, &fakeBackend{})
	d.keys("2", "/", "s", "h", "o", "p", " ", "w", "e", "b", "enter", "y")
	d.shows("service shop/web as YAML", "kind: Service", "image: example/web:1", "replicas: 2")
	d.keys("esc", "6", "/", "s", "e", "c", "r", "e", "t", "enter", "y")
	d.shows("secret shop/shop-tls as YAML", "kind: Secret")
	d.hides("BEGIN CERTIFICATE")
}

// A task whose pod has several containers: l asks which one first.
func TestLogsAskWhichContainer(t *testing.T) {
	t.Parallel()
	b := &fakeBackend{logs: map[string][]string{"shop/web-1/sidecar": {"from the sidecar"}}}
	d := newDriver(t, b)
	data := fixture(t)
	for _, o := range data.Objects[legion.KindTask] {
		if tk := o.(*legion.Task); tk.Metadata.Name == "web-1" {
			tk.Spec.Pod.Containers = append(tk.Spec.Pod.Containers, legion.Container{Name: "sidecar", Image: "example/side:1"})
		}
	}
	d.m = d.m.SetData(data)
	d.logLines = 1
	d.keys("3", "/", "w", "e", "b", "-", "1", "enter", "l")
	d.shows("logs of which container (app, sidecar)?")
	d.keys("s", "i", "d", "e", "c", "a", "r", "enter")
	d.shows("logs shop/web-1 sidecar", "from the sidecar")
}
