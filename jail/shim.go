package jail

import (
	"bufio"
	"context"
	"errors"
	"flag"
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
)

// ShimMain is `legion jail-shim`, dispatched by cmd/legion before anything
// else starts; args are the words after "jail-shim". It returns the exit
// code.
//
//	start DIR      start the container recorded in DIR under a detached
//	               supervisor; exit 0 once its process runs, else
//	               ShimExitPermanent or ShimExitFailed with the reason on
//	               standard error
//	supervise DIR  the supervisor itself (started by start)
//	exec DIR [-user U] [-workdir W] [-env K=V]... -- CMD...
//	               run CMD in the running container on this terminal's
//	               standard streams and exit with its code
//
// The process enters the jail in the child between fork and exec
// (SysProcAttr.Jail on FreeBSD), so the Go runtime's threads never matter.
func ShimMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: legion jail-shim start|supervise|exec DIR ...")
		return 2
	}
	dir := args[1]
	switch args[0] {
	case "start":
		return shimStart(dir)
	case "supervise":
		return shimSupervise(dir)
	case "exec":
		return shimExec(dir, args[2:])
	}
	fmt.Fprintf(os.Stderr, "jail-shim: unknown mode %q: expected start, supervise or exec\n", args[0])
	return 2
}

// Report lines from the supervisor to the start front end, on fd 3.
const (
	reportOK        = "ok"
	reportPermanent = "permanent "
	reportFailed    = "failed "
)

func shimStart(dir string) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "jail-shim: %v\n", err)
		return ShimExitFailed
	}
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "jail-shim: %v\n", err)
		return ShimExitFailed
	}
	cmd := exec.Command(exe, "jail-shim", "supervise", dir)
	cmd.ExtraFiles = []*os.File{w}
	// What the supervisor has to say beyond its report goes to a file
	// beside the container's log.
	if f, err := os.OpenFile(filepath.Join(dir, ShimLogFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
		cmd.Stderr = f
		defer f.Close()
	}
	// Its own session: the agent's signals and exit do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "jail-shim: start supervisor: %v\n", err)
		return ShimExitFailed
	}
	w.Close()
	type answer struct {
		line string
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		got <- answer{strings.TrimSpace(line), err}
	}()
	var a answer
	select {
	case a = <-got:
	case <-time.After(waitTimeout):
		a = answer{err: errors.New("no answer from the supervisor")}
	}
	r.Close()
	cmd.Process.Release()
	switch {
	case a.line == reportOK:
		return 0
	case strings.HasPrefix(a.line, reportPermanent):
		fmt.Fprintln(os.Stderr, strings.TrimPrefix(a.line, reportPermanent))
		return ShimExitPermanent
	case strings.HasPrefix(a.line, reportFailed):
		fmt.Fprintln(os.Stderr, strings.TrimPrefix(a.line, reportFailed))
		return ShimExitFailed
	}
	fmt.Fprintf(os.Stderr, "jail-shim: supervisor ended without reporting: %v\n", a.err)
	return ShimExitFailed
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
			var se *StartError
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
	sup := shimSupervisor(dir)
	if _, err := sup.Run(ctx, stop, started); err != nil {
		started(err)
		return 1
	}
	return 0
}

func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func shimExec(dir string, args []string) int {
	fs := flag.NewFlagSet("jail-shim exec", flag.ContinueOnError)
	user := fs.String("user", "", "user[:group] in the image")
	workdir := fs.String("workdir", "", "working directory in the container")
	tty := fs.Bool("tty", false, "run on a pseudo-terminal")
	var env stringList
	fs.Var(&env, "env", "KEY=VALUE, repeated")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var rec Record
	if err := ReadJSON(filepath.Join(dir, RecordFile), &rec); err != nil {
		fmt.Fprintf(os.Stderr, "jail-shim exec: %v\n", err)
		return ShimExitFailed
	}
	ps, err := ProcessFor(rec.Spec, fs.Args(), env, *user, *workdir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "jail-shim exec: %v\n", err)
		return ShimExitPermanent
	}
	ps.Stdin, ps.Stdout, ps.Stderr = os.Stdin, os.Stdout, os.Stderr
	var master *os.File
	if *tty {
		m, slave, err := openPTY()
		if err != nil {
			fmt.Fprintf(os.Stderr, "jail-shim exec: %v\n", err)
			return ShimExitFailed
		}
		defer slave.Close()
		master = m
		defer master.Close()
		ps.Stdin, ps.Stdout, ps.Stderr, ps.TTY = slave, slave, slave, true
		if !envHas(ps.Env, "TERM") {
			ps.Env = append(ps.Env, "TERM=xterm")
		}
	}
	sup := shimSupervisor(dir)
	proc, err := sup.Starter.Start(ps)
	if err != nil {
		fmt.Fprintf(os.Stderr, "jail-shim exec: %v\n", err)
		var se *StartError
		if errors.As(err, &se) && se.Permanent {
			return ShimExitPermanent
		}
		return ShimExitFailed
	}
	var output sync.WaitGroup
	if master != nil {
		// The caller's streams to and from the terminal; the output ends
		// when the last holder of the terminal's other side goes (EIO).
		ps.Stdin.(*os.File).Close()
		go io.Copy(master, os.Stdin)
		output.Add(1)
		go func() {
			defer output.Done()
			io.Copy(os.Stdout, master)
		}()
	}
	code, _, err := proc.Wait()
	if err != nil {
		fmt.Fprintf(os.Stderr, "jail-shim exec: %v\n", err)
	}
	output.Wait()
	return code
}

func envHas(env []string, key string) bool {
	_, ok := envValue(env, key)
	return ok
}
