package sessionstest

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/legionbsd/legion/jail"
)

// Execs is a node's containers as exec sees them: commands the tests
// know. "cat" copies its input to its output; "fail TEXT" writes TEXT to
// stderr and exits 3; "wait" runs until the session ends; "sizes N"
// writes the terminal's size, then each of N resizes, as "ROWSxCOLS"
// lines and exits 0; anything in a container marked with Stop is refused
// as not running.
type Execs struct {
	mu      sync.Mutex
	stopped map[string]bool // container ids
	calls   []string
	running int
}

// Stop marks a container as not running.
func (e *Execs) Stop(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.stopped == nil {
		e.stopped = map[string]bool{}
	}
	e.stopped[id] = true
}

// Exec implements sessions.ExecFunc.
func (e *Execs) Exec(ctx context.Context, id string, spec jail.ExecSpec) (int, error) {
	e.mu.Lock()
	call := id + ": " + strings.Join(spec.Command, " ")
	switch {
	case spec.TTY && spec.Size != nil:
		call += " (tty " + spec.Size.String() + ")"
	case spec.TTY:
		call += " (tty)"
	}
	if err := spec.CheckTerminal(); err != nil {
		e.calls = append(e.calls, call)
		e.mu.Unlock()
		return -1, fmt.Errorf("exec in %s: %w: %w", id, jail.ErrPermanent, err)
	}
	e.calls = append(e.calls, call)
	stopped := e.stopped[id]
	e.running++
	e.mu.Unlock()
	defer func() { e.mu.Lock(); e.running--; e.mu.Unlock() }()
	if stopped {
		return -1, fmt.Errorf("exec in %s: %w", id, jail.ErrNotRunning)
	}
	switch spec.Command[0] {
	case "cat":
		if spec.Stdin == nil {
			return 0, nil
		}
		if _, err := io.Copy(spec.Stdout, spec.Stdin); err != nil {
			return 1, nil
		}
		return 0, nil
	case "fail":
		fmt.Fprint(spec.Stderr, strings.Join(spec.Command[1:], " "))
		return 3, nil
	case "wait":
		<-ctx.Done()
		return -1, ctx.Err()
	case "sizes":
		n, err := strconv.Atoi(spec.Command[len(spec.Command)-1])
		if err != nil || spec.Size == nil {
			fmt.Fprint(spec.Stderr, "sizes: needs N and a terminal size")
			return 2, nil
		}
		fmt.Fprintf(spec.Stdout, "%s\n", spec.Size)
		for range n {
			select {
			case s, ok := <-spec.Resize:
				if !ok {
					return 1, nil
				}
				fmt.Fprintf(spec.Stdout, "%s\n", s)
			case <-ctx.Done():
				return -1, ctx.Err()
			}
		}
		return 0, nil
	}
	fmt.Fprintf(spec.Stderr, "%s: not found", spec.Command[0])
	return 127, nil
}

// Calls lists "container id: command" of every exec so far, marked
// " (tty)" when run on a terminal, " (tty ROWSxCOLS)" when given its size.
func (e *Execs) Calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.calls...)
}

// Running is how many execs have not returned.
func (e *Execs) Running() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running
}

// PodIPs is which pods the node runs, at which address, as its agent
// knows them.
type PodIPs struct {
	mu  sync.Mutex
	ips map[string]string
}

// Set records a task's pod address.
func (p *PodIPs) Set(taskUID, ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ips == nil {
		p.ips = map[string]string{}
	}
	p.ips[taskUID] = ip
}

// PodIP implements sessions.Config.PodIP.
func (p *PodIPs) PodIP(taskUID string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ip, ok := p.ips[taskUID]
	return ip, ok
}
