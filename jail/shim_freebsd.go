//go:build freebsd

package jail

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/legionbsd/legion/sys"
)

// JailStarter starts processes inside a container's jail: the child
// attaches to the jail (jail_attach), takes the container's user and groups
// (setgroups, setgid, setuid) and changes directory before it execs, so
// the path and the directory are the container's.
type JailStarter struct{ Runner sys.Runner }

// Start implements Starter.
func (s JailStarter) Start(p ProcSpec) (Process, error) {
	res, err := sys.Run(context.Background(), s.Runner, "jls", "-j", p.Jail, "jid")
	if err != nil {
		return nil, fmt.Errorf("find jail %s: %w", p.Jail, err)
	}
	jid, err := strconv.Atoi(strings.TrimSpace(string(res.Stdout)))
	if err != nil {
		return nil, fmt.Errorf("jail %s: jid %q: expected a number", p.Jail, res.Stdout)
	}
	cmd := &exec.Cmd{Path: p.Path, Args: p.Args, Env: p.Env, Dir: p.Dir,
		Stdin: p.Stdin, Stdout: p.Stdout, Stderr: p.Stderr}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Jail:       jid,
		Setsid:     p.Setsid || p.TTY,
		Setctty:    p.TTY,
		Credential: &syscall.Credential{Uid: p.Cred.Uid, Gid: p.Cred.Gid, Groups: p.Cred.Groups},
	}
	if err := cmd.Start(); err != nil {
		return nil, classifyStart(err)
	}
	return execProcess{cmd}, nil
}

// shimSupervisor is the supervisor of a jailed container: removing the
// jail ends everything the process left.
func shimSupervisor(dir string) *Supervisor {
	return &Supervisor{Dir: dir, Starter: JailStarter{Runner: sys.Exec{}}, Runner: sys.Exec{}}
}
