package process

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legionbsd/legion/jail"
)

// ShimCommand is the word cmd/legion dispatches to ShimMain.
const ShimCommand = "process-shim"

// ShimLogFile holds what the supervisor itself says (not the container's
// output), in the container's directory.
const ShimLogFile = "shim.log"

// Report lines from the supervisor to the start front end, on fd 3.
const (
	reportOK        = "ok"
	reportPermanent = "permanent "
	reportFailed    = "failed "
)

// startTimeout bounds how long the front end waits for the supervisor to
// say whether the process runs.
const startTimeout = 30 * time.Second

// ShimMain is `legion process-shim`; args are the words after it. It
// returns the process's exit code.
//
//	start DIR      start the container recorded in DIR under a detached
//	               supervisor and exit once its process runs: 0, or
//	               jail.ShimExitPermanent / jail.ShimExitFailed with the
//	               reason on standard error
//	supervise DIR  the supervisor itself (started by start)
//
// The front end exits at once so the supervisor is re-parented to init,
// which reaps it: the daemon keeps no child per container.
func ShimMain(args []string) int {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: legion process-shim start|supervise DIR")
		return 2
	}
	switch args[0] {
	case "start":
		return shimStart(args[1])
	case "supervise":
		return shimSupervise(args[1])
	}
	fmt.Fprintf(os.Stderr, "process-shim: unknown mode %q: expected start or supervise\n", args[0])
	return 2
}

func shimStart(dir string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "process-shim: %v\n", err)
		return jail.ShimExitFailed
	}
	exe, err := os.Executable()
	if err != nil {
		return fail(err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, ShimLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fail(err)
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	cmd := exec.Command(exe, ShimCommand, "supervise", dir)
	cmd.ExtraFiles = []*os.File{w}
	// Its own output, never the caller's pipes: the caller may be gone
	// long before the supervisor ends.
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: the daemon's signals and exit do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fail(fmt.Errorf("start supervisor: %w", err))
	}
	w.Close()
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	var line string
	select {
	case line = <-got:
	case <-time.After(startTimeout):
		line = reportFailed + "no answer from the supervisor within " + startTimeout.String()
	}
	cmd.Process.Release()
	switch {
	case line == reportOK:
		return 0
	case strings.HasPrefix(line, reportPermanent):
		fmt.Fprintln(os.Stderr, strings.TrimPrefix(line, reportPermanent))
		return jail.ShimExitPermanent
	case strings.HasPrefix(line, reportFailed):
		fmt.Fprintln(os.Stderr, strings.TrimPrefix(line, reportFailed))
		return jail.ShimExitFailed
	}
	fmt.Fprintf(os.Stderr, "process-shim: supervisor ended without reporting (see %s)\n", filepath.Join(dir, ShimLogFile))
	return jail.ShimExitFailed
}

func shimSupervise(dir string) int {
	report := os.NewFile(3, "report")
	var once sync.Once
	started := func(err error) {
		once.Do(func() {
			if report == nil {
				return
			}
			line := reportOK
			var se *jail.StartError
			switch {
			case err == nil:
			case errors.As(err, &se) && se.Permanent:
				line = reportPermanent + oneLine(err.Error())
			default:
				line = reportFailed + oneLine(err.Error())
			}
			io.WriteString(report, line+"\n")
			report.Close()
		})
	}
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT, syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM)
	stop := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sigs:
			close(stop)
		case <-ctx.Done():
		}
	}()
	sup := &jail.Supervisor{Dir: dir, Starter: starter(), Kill: jail.KillGroup}
	if _, err := sup.Run(ctx, stop, started); err != nil {
		started(err)
		fmt.Fprintf(os.Stderr, "process-shim: %s: %v\n", dir, err)
		return 1
	}
	return 0
}

// starter runs containers as host processes in their own session,
// chrooted into their root when we may.
func starter() jail.HostStarter { return jail.HostStarter{Chroot: os.Geteuid() == 0} }

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }
