package jailtest

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legionbsd/legion/jail"
)

// Memory is an in-memory jail.Runtime for tests of its users: containers
// run an interpreter of the few sh statements the conformance suite uses
// (see script.go) instead of programs. Close stops what still runs.
type Memory struct {
	mu   sync.Mutex
	ctrs map[string]*memCtr
	subs []chan jail.Event
	wg   sync.WaitGroup
}

type memCtr struct {
	spec    jail.ContainerSpec
	status  jail.ContainerStatus
	logs    []jail.LogRecord
	changed chan struct{} // closed and replaced when logs grow
	sigs    chan syscall.Signal
	done    chan struct{} // closed when the current run ends
}

var _ jail.Runtime = (*Memory)(nil)

// NewMemory returns an empty in-memory runtime.
func NewMemory() *Memory { return &Memory{ctrs: map[string]*memCtr{}} }

// Close kills every running container and waits for them.
func (m *Memory) Close() {
	m.mu.Lock()
	for _, c := range m.ctrs {
		if c.status.State == jail.StateRunning && c.sigs != nil {
			select {
			case c.sigs <- syscall.SIGKILL:
			default:
			}
		}
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *Memory) emit(typ string, c *memCtr, code int) {
	ev := jail.Event{Type: typ, ID: c.spec.ID, Labels: maps.Clone(c.spec.Labels), ExitCode: code, Time: time.Now()}
	for _, s := range m.subs {
		select {
		case s <- ev:
		default: // a subscriber that does not read loses events; users reconcile
		}
	}
}

// Create implements jail.Runtime.
func (m *Memory) Create(ctx context.Context, spec jail.ContainerSpec) error {
	if err := spec.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.ctrs[spec.ID]; ok {
		return fmt.Errorf("create %s: %w", spec.ID, jail.ErrExists)
	}
	if spec.Pod != "" {
		p, ok := m.ctrs[spec.Pod]
		if !ok || !p.spec.Infra {
			return fmt.Errorf("create %s: pod %s: %w", spec.ID, spec.Pod, jail.ErrNotFound)
		}
	}
	c := &memCtr{spec: spec, changed: make(chan struct{})}
	c.status = jail.ContainerStatus{
		ID: spec.ID, Pod: spec.Pod, Infra: spec.Infra,
		Labels: maps.Clone(spec.Labels), Annotations: maps.Clone(spec.Annotations),
		State: jail.StateCreated, CreatedAt: time.Now(),
	}
	if spec.Infra {
		c.status.State = jail.StateRunning
		c.status.StartedAt = c.status.CreatedAt
	}
	m.ctrs[spec.ID] = c
	m.emit(jail.EventCreated, c, 0)
	return nil
}

func (m *Memory) get(id string) (*memCtr, error) {
	c, ok := m.ctrs[id]
	if !ok {
		return nil, fmt.Errorf("container %s: %w", id, jail.ErrNotFound)
	}
	return c, nil
}

func envMap(lists ...[]string) map[string]string {
	env := map[string]string{}
	for _, l := range lists {
		for _, kv := range l {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
	}
	return env
}

func runnable(argv []string) error {
	if len(argv) == 3 && (argv[0] == "/bin/sh" || argv[0] == "sh") && argv[1] == "-c" {
		return nil
	}
	return fmt.Errorf("%w: %s: no such file or directory", jail.ErrPermanent, argv[0])
}

// Start implements jail.Runtime.
func (m *Memory) Start(ctx context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.get(id)
	if err != nil {
		return err
	}
	if c.spec.Infra || c.status.State == jail.StateRunning {
		return nil
	}
	if err := runnable(c.spec.Command); err != nil {
		c.status.Message = err.Error()
		return fmt.Errorf("start %s: %w", id, err)
	}
	c.sigs = make(chan syscall.Signal, 4)
	c.done = make(chan struct{})
	c.status.State = jail.StateRunning
	c.status.StartedAt = time.Now()
	c.status.FinishedAt = time.Time{}
	c.status.ExitCode, c.status.Signal, c.status.Message = 0, "", ""
	c.status.Pid = 1
	p := &proc{
		env:   envMap(c.spec.ImageEnv, c.spec.Env),
		sigs:  c.sigs,
		traps: map[syscall.Signal]string{},
		out: func(stream, text string) {
			m.mu.Lock()
			defer m.mu.Unlock()
			c.logs = append(c.logs, jail.LogRecord{Time: time.Now(), Stream: stream, Text: text})
			close(c.changed)
			c.changed = make(chan struct{})
		},
	}
	argv, done := slices.Clone(c.spec.Command), c.done
	m.emit(jail.EventStarted, c, 0)
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		r := p.run(argv)
		m.mu.Lock()
		defer m.mu.Unlock()
		c.status.State = jail.StateExited
		c.status.ExitCode = r.code
		c.status.Pid = 0
		if r.signal != 0 {
			c.status.Signal = SignalName(r.signal)
		}
		c.status.FinishedAt = time.Now()
		close(done)
		m.emit(jail.EventDied, c, r.code)
	}()
	return nil
}

// Stop implements jail.Runtime.
func (m *Memory) Stop(ctx context.Context, id string, grace time.Duration) error {
	m.mu.Lock()
	c, err := m.get(id)
	if err != nil {
		m.mu.Unlock()
		return err
	}
	if c.spec.Infra || c.status.State != jail.StateRunning {
		m.mu.Unlock()
		return nil
	}
	if grace < 0 {
		grace = c.spec.Grace()
	}
	sigs, done, sig := c.sigs, c.done, c.spec.Signal()
	m.mu.Unlock()
	sigs <- sig
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	sigs <- syscall.SIGKILL
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Remove implements jail.Runtime.
func (m *Memory) Remove(ctx context.Context, id string) error {
	m.mu.Lock()
	c, ok := m.ctrs[id]
	if !ok {
		m.mu.Unlock()
		return nil
	}
	var members []string
	if c.spec.Infra {
		for mid, mc := range m.ctrs {
			if mc.spec.Pod == id {
				members = append(members, mid)
			}
		}
	}
	m.mu.Unlock()
	for _, mid := range members {
		if err := m.Remove(ctx, mid); err != nil {
			return err
		}
	}
	if err := m.Stop(ctx, id, 0); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.ctrs, id)
	close(c.changed) // a follower wakes, to find it gone
	c.changed = make(chan struct{})
	m.emit(jail.EventRemoved, c, c.status.ExitCode)
	return nil
}

// Inspect implements jail.Runtime.
func (m *Memory) Inspect(ctx context.Context, id string) (jail.ContainerStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.get(id)
	if err != nil {
		return jail.ContainerStatus{}, err
	}
	st := c.status
	st.Labels, st.Annotations = maps.Clone(st.Labels), maps.Clone(st.Annotations)
	return st, nil
}

// List implements jail.Runtime.
func (m *Memory) List(ctx context.Context, selector map[string]string) ([]jail.ContainerStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []jail.ContainerStatus
	for _, c := range m.ctrs {
		if jail.MatchLabels(c.spec.Labels, selector) {
			st := c.status
			st.Labels, st.Annotations = maps.Clone(st.Labels), maps.Clone(st.Annotations)
			out = append(out, st)
		}
	}
	slices.SortFunc(out, func(a, b jail.ContainerStatus) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// Events implements jail.Runtime.
func (m *Memory) Events(ctx context.Context) (<-chan jail.Event, error) {
	ch := make(chan jail.Event, 1024)
	m.mu.Lock()
	m.subs = append(m.subs, ch)
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		<-ctx.Done()
		m.mu.Lock()
		defer m.mu.Unlock()
		m.subs = slices.DeleteFunc(m.subs, func(s chan jail.Event) bool { return s == ch })
		close(ch)
	}()
	return ch, nil
}

// Exec implements jail.Runtime.
func (m *Memory) Exec(ctx context.Context, id string, spec jail.ExecSpec) (int, error) {
	m.mu.Lock()
	c, err := m.get(id)
	if err != nil {
		m.mu.Unlock()
		return -1, err
	}
	if c.spec.Infra || c.status.State != jail.StateRunning {
		m.mu.Unlock()
		return -1, fmt.Errorf("exec in %s: %w", id, jail.ErrNotRunning)
	}
	env := envMap(c.spec.ImageEnv, c.spec.Env, spec.Env)
	m.mu.Unlock()
	if err := runnable(spec.Command); err != nil {
		return -1, fmt.Errorf("exec in %s: %w", id, err)
	}
	var wmu sync.Mutex
	p := &proc{env: env, sigs: make(chan syscall.Signal), traps: map[syscall.Signal]string{},
		out: func(stream, text string) {
			wmu.Lock()
			defer wmu.Unlock()
			w := spec.Stdout
			if stream == jail.StreamStderr {
				w = spec.Stderr
			}
			if w != nil {
				io.WriteString(w, text+"\n")
			}
		}}
	return p.run(spec.Command).code, nil
}

// Logs implements jail.Runtime.
func (m *Memory) Logs(ctx context.Context, id string, opts jail.LogOptions) (io.ReadCloser, error) {
	m.mu.Lock()
	c, err := m.get(id)
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	stop := make(chan struct{})
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		sent := 0
		for {
			m.mu.Lock()
			recs, changed := slices.Clone(c.logs[sent:]), c.changed
			gone := m.ctrs[id] != c // removed (and maybe made again)
			m.mu.Unlock()
			sent += len(recs)
			for _, r := range recs {
				if !opts.Since.IsZero() && r.Time.Before(opts.Since) {
					continue
				}
				if _, err := io.WriteString(pw, jail.FormatRecord(r)); err != nil {
					return
				}
			}
			if !opts.Follow || gone {
				pw.Close() // following ends with the container
				return
			}
			select {
			case <-changed:
			case <-ctx.Done():
				pw.Close()
				return
			case <-stop:
				return
			}
		}
	}()
	return &logReader{PipeReader: pr, stop: stop}, nil
}

// Usage implements jail.Runtime.
func (m *Memory) Usage(ctx context.Context, id string) (jail.Usage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.get(id)
	if err != nil {
		return jail.Usage{}, err
	}
	if c.status.State == jail.StateRunning && !c.spec.Infra {
		return jail.Usage{Processes: 1}, nil
	}
	return jail.Usage{}, nil
}

// logReader stops its feeding goroutine when closed.
type logReader struct {
	*io.PipeReader
	stop chan struct{}
	once sync.Once
}

func (r *logReader) Close() error {
	r.once.Do(func() { close(r.stop) })
	return r.PipeReader.Close()
}
