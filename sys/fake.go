package sys

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// Answer is what the Fake replies to a command it matches.
type Answer struct {
	Stdout string
	Stderr string
	Code   int   // non-zero makes the command fail with an *ExitError
	Err    error // set to fail as a command that could not start
}

type rule struct {
	prefix string
	answer Answer
	times  int // 0: always; otherwise answer this many times, then fall through
}

// Fake is a Runner for tests: it records every command and answers from a
// script of rules. A command no rule matches succeeds with no output.
// Rules are matched against Cmd.String(), by prefix, in the order added;
// a rule limited with Once is used up after one match.
type Fake struct {
	mu    sync.Mutex
	rules []*rule
	calls []Cmd
}

// NewFake returns a Fake with no rules.
func NewFake() *Fake { return &Fake{} }

// On answers every command starting with prefix.
func (f *Fake) On(prefix string, a Answer) *Fake {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{prefix: prefix, answer: a})
	return f
}

// Once answers the next command starting with prefix, once.
func (f *Fake) Once(prefix string, a Answer) *Fake {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{prefix: prefix, answer: a, times: 1})
	return f
}

// Run implements Runner.
func (f *Fake) Run(ctx context.Context, c Cmd) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	line := c.String()
	f.mu.Lock()
	f.calls = append(f.calls, Cmd{Name: c.Name, Args: append([]string(nil), c.Args...), Stdin: append([]byte(nil), c.Stdin...)})
	var a Answer
	for _, r := range f.rules {
		if r.times < 0 || !strings.HasPrefix(line, r.prefix) {
			continue
		}
		a = r.answer
		if r.times > 0 {
			r.times--
			if r.times == 0 {
				r.times = -1
			}
		}
		break
	}
	f.mu.Unlock()
	res := Result{Stdout: []byte(a.Stdout), Stderr: []byte(a.Stderr)}
	if a.Err != nil {
		return res, fmt.Errorf("%s: %w", line, a.Err)
	}
	if a.Code != 0 {
		return res, &ExitError{Cmd: line, Code: a.Code, Stderr: a.Stderr}
	}
	return res, nil
}

// Calls returns the commands run so far.
func (f *Fake) Calls() []Cmd {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Cmd(nil), f.calls...)
}

// Lines returns the command lines run so far, as Cmd.String renders them.
func (f *Fake) Lines() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.calls))
	for i, c := range f.calls {
		out[i] = c.String()
	}
	return out
}

// Reset forgets the recorded commands and keeps the rules.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}
