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
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ShimCommand is the first argument that makes the legion binary this
// supervisor (package jail/shim dispatches it).
const ShimCommand = "jail-shim"

// ShimMain is `legion jail-shim`, dispatched by package jail/shim before
// the binary's other packages initialize; args are the words after
// "jail-shim". It returns the exit code.
//
//	supervise DIR  the supervisor of the container recorded in DIR,
//	               started by the runtime (ShimFront.Start), which it
//	               tells on descriptor 3 whether the process runs
//	exec DIR [-user U] [-workdir W] [-env K=V]... [-tty [-size RxC]
//	     [-resize-fd N]] -- CMD...
//	               run CMD in the running container on this terminal's
//	               standard streams and exit with its code; with -tty
//	               on a pseudo-terminal of that size, resized to each
//	               "RxC" line read from descriptor N
//
// The process enters the jail in the child between fork and exec
// (SysProcAttr.Jail on FreeBSD), so the Go runtime's threads never matter.
func ShimMain(args []string) int {
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: legion jail-shim supervise|exec DIR ...")
		return 2
	}
	dir := args[1]
	front := ShimFront{Command: ShimCommand, Supervisor: shimSupervisor}
	switch args[0] {
	case "supervise":
		return front.Supervise(dir)
	case "exec":
		return shimExec(dir, args[2:])
	}
	fmt.Fprintf(os.Stderr, "jail-shim: unknown mode %q: expected supervise or exec\n", args[0])
	return 2
}

// ShimStartTimeout is the longest Start waits for the supervisor to say
// whether the process runs.
const ShimStartTimeout = 30 * time.Second

// The descriptors a supervisor is started with beyond its standard ones.
const (
	reportFD = 3 // the report of its start, written once
	lockFD   = 4 // the run's start lock, when the runtime passes one
)

// Report lines from the supervisor to Start, on fd 3.
const (
	reportOK        = "ok"
	reportPermanent = "permanent "
	reportFailed    = "failed "
)

// ShimFront is the front end of a supervisor command of the legion binary
// (jail-shim, process-shim): Start starts the supervisor
// and relays its report, and Supervise is the supervisor.
type ShimFront struct {
	// Command is the word after `legion` that names the supervisor
	// command: Start runs `legion Command supervise DIR`.
	Command string
	// Supervisor returns the supervisor of the container in dir.
	Supervisor func(dir string) *Supervisor
}

// Start starts `exe Command supervise dir` and returns once it
// says whether the container's process runs: code 0, or
// ShimExitPermanent or ShimExitFailed with the reason. The supervisor
// inherits lock, the run's start lock (Keeper.NewRun), when there is one,
// and holds it while it lives. The supervisor is
// this process's child, in a session of its own, reaped once it ends;
// started by an earlier process it is init's. Both runtimes start their
// supervisors so, never through a front end process that exits after it:
// one start of the binary per container instead of two.
func (f ShimFront) Start(exe, dir string, lock *os.File) (code int, reason string) {
	proc, code, reason := f.launch(exe, dir, lock)
	if proc != nil {
		pid := proc.Pid
		proc.Release()
		supervisors.add(pid)
	}
	return code, reason
}

// launch starts `exe Command supervise dir` in a session of its own and
// returns once it says whether the container's process runs: code 0, or
// ShimExitPermanent or ShimExitFailed with the reason. proc is the
// supervisor when it started (the caller's child, to reap or release).
func (f ShimFront) launch(exe, dir string, lock *os.File) (proc *os.Process, code int, reason string) {
	fail := func(err error) (*os.Process, int, string) {
		return nil, ShimExitFailed, fmt.Sprintf("%s: %v", f.Command, err)
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
	cmd := exec.Command(exe, f.Command, "supervise", dir)
	cmd.ExtraFiles = []*os.File{w} // descriptor 3 (reportFD)
	if lock != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, lock) // descriptor 4 (lockFD)
	}
	// Its own output, never the caller's pipes: the caller may be gone
	// long before the supervisor ends.
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: the caller's signals and exit do not reach it.
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
	t := time.NewTimer(ShimStartTimeout)
	defer t.Stop()
	select {
	case line = <-got:
	case <-t.C:
		line = reportFailed + "no answer from the supervisor within " + ShimStartTimeout.String()
	}
	switch {
	case line == reportOK:
		return cmd.Process, 0, ""
	case strings.HasPrefix(line, reportPermanent):
		return cmd.Process, ShimExitPermanent, strings.TrimPrefix(line, reportPermanent)
	case strings.HasPrefix(line, reportFailed):
		return cmd.Process, ShimExitFailed, strings.TrimPrefix(line, reportFailed)
	}
	return cmd.Process, ShimExitFailed, fmt.Sprintf("%s: supervisor ended without reporting (see %s)", f.Command, filepath.Join(dir, ShimLogFile))
}

// Supervise is the supervisor of the container in dir: it reports the
// start on fd 3 (to Start) and runs the process to its end, stopping
// it on SIGTERM as the stop request says.
func (f ShimFront) Supervise(dir string) int {
	// Inherited without close-on-exec: set it, so the container's process
	// holds neither the report pipe nor the start lock (which the
	// supervisor keeps, open, to its end).
	syscall.CloseOnExec(reportFD)
	syscall.CloseOnExec(lockFD)
	report := os.NewFile(reportFD, "report")
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
	if _, err := f.Supervisor(dir).Run(ctx, stop, started); err != nil {
		started(err)
		fmt.Fprintf(os.Stderr, "%s: %s: %v\n", f.Command, dir, err)
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
	size := fs.String("size", "", "ROWSxCOLS: the terminal's size (with -tty)")
	resizeFD := fs.Int("resize-fd", -1, "descriptor whose ROWSxCOLS lines resize the terminal (with -tty)")
	var env stringList
	fs.Var(&env, "env", "KEY=VALUE, repeated")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !*tty && (*size != "" || *resizeFD >= 0) {
		fmt.Fprintln(os.Stderr, "jail-shim exec: -size and -resize-fd need -tty")
		return 2
	}
	var initial *TermSize
	if *size != "" {
		s, err := parseTermSize(*size)
		if err != nil {
			fmt.Fprintf(os.Stderr, "jail-shim exec: -size: %v\n", err)
			return 2
		}
		initial = &s
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
		if initial != nil {
			if err := setWinsize(master, *initial); err != nil {
				fmt.Fprintf(os.Stderr, "jail-shim exec: %v\n", err)
				return ShimExitFailed
			}
		}
		if *resizeFD >= 0 {
			go followResizes(os.NewFile(uintptr(*resizeFD), "resizes"), master)
		}
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

// followResizes applies each size read from r to the terminal until r
// ends. A size that cannot be read or set is reported and skipped: the
// command goes on at its current size.
func followResizes(r *os.File, master *os.File) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		s, err := parseTermSize(sc.Text())
		if err == nil {
			err = setWinsize(master, s)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "jail-shim exec: resize: %v\n", err)
		}
	}
}

// parseTermSize reads ROWSxCOLS, as TermSize.String writes it.
func parseTermSize(v string) (TermSize, error) {
	rows, cols, ok := strings.Cut(v, "x")
	r, rerr := strconv.ParseUint(rows, 10, 16)
	c, cerr := strconv.ParseUint(cols, 10, 16)
	if !ok || rerr != nil || cerr != nil {
		return TermSize{}, fmt.Errorf("%q: expected ROWSxCOLS, each 0 to 65535", v)
	}
	return TermSize{Rows: uint16(r), Cols: uint16(c)}, nil
}

func envHas(env []string, key string) bool {
	_, ok := envValue(env, key)
	return ok
}
