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
		return res, &ExitError{Cmd: line, Code: a.Code, Stderr: a.Stderr, Stdout: a.Stdout}
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

// FreeBSD's answers, each on the stream and with the status its tool's
// source uses, for tests to script a Fake with. A test that puts a
// message on the wrong stream passes against code that would fail on a
// host, so tests take them from here.

// RouteExists is route(8) adding a route that is in the table already:
// newroute prints the refusal with printf (standard output) and exits 1;
// over netlink (the default since 14.0) nothing goes to standard error.
func RouteExists(dest, gateway string) Answer {
	return Answer{Stdout: fmt.Sprintf("add net %s: gateway %s fib 0: route already in table\n", dest, gateway), Code: 1}
}

// RouteErrno is route(8) adding a route whose failure it prints from an
// errno it has no text of its own for: only the strerror text names it.
func RouteErrno(dest, gateway, strerror string) Answer {
	return Answer{Stdout: fmt.Sprintf("add net %s: gateway %s fib 0: %s\n", dest, gateway, strerror), Code: 1}
}

// UmountNotMounted is umount(8) of a path that exists but is no mount
// point and no directory (a file mounted over a file, after a reboot):
// checkname finds no mount and warns on standard error, exit 1.
func UmountNotMounted(path string) Answer {
	return Answer{Stderr: fmt.Sprintf("umount: %s: unknown file system\n", path), Code: 1}
}

// UmountMissing is umount(8) of a path that does not exist: statfs fails,
// then the same refusal as UmountNotMounted.
func UmountMissing(path string) Answer {
	return Answer{Stderr: fmt.Sprintf("umount: %s: statfs: No such file or directory\numount: %s: unknown file system\n", path, path), Code: 1}
}

// UmountNotRoot is umount(8) of a directory nothing is mounted on.
func UmountNotRoot(path string) Answer {
	return Answer{Stderr: fmt.Sprintf("umount: %s: not a file system root directory\n", path), Code: 1}
}

// IP6AddrctlNone is `ip6addrctl show` on a host without a policy table:
// get_policy prints the notice with printf and the command succeeds.
func IP6AddrctlNone() Answer {
	return Answer{Stdout: "no source-address-selection policy is installed\n"}
}

// PfEnabled is `pfctl -e` enabling pf: the notice goes to standard error.
func PfEnabled() Answer { return Answer{Stderr: "pf enabled\n"} }

// PfAlreadyEnabled is `pfctl -e` when pf runs already: errx, exit 1.
func PfAlreadyEnabled() Answer { return Answer{Stderr: "pfctl: pf already enabled\n", Code: 1} }

// PfInfo is the head of `pfctl -s info` (standard output).
func PfInfo(enabled bool) Answer {
	s := "Disabled"
	if enabled {
		s = "Enabled"
	}
	return Answer{Stdout: fmt.Sprintf("Status: %s for 0 days 00:12:03          Debug: Urgent\n\nState Table                          Total             Rate\n  current entries                        0\n", s)}
}

// SysctlUnknown is sysctl(8) asked for an OID the kernel lacks.
func SysctlUnknown(name string) Answer {
	return Answer{Stderr: fmt.Sprintf("sysctl: unknown oid '%s'\n", name), Code: 1}
}

// KldstatNoModule is `kldstat -q -m NAME` for a module the kernel does
// not have: modfind fails, -q keeps the warning off standard error, exit 1.
func KldstatNoModule() Answer { return Answer{Code: 1} }

// FreeBSDVersion is `freebsd-version -ru`: the running kernel's release
// and then the userland's, a line each on standard output.
func FreeBSDVersion(kernel, userland string) Answer {
	return Answer{Stdout: kernel + "\n" + userland + "\n"}
}
