package jail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/legionbsd/legion/sys"
	"golang.org/x/sys/unix"
)

// ProcSpec is a process to start in a container.
type ProcSpec struct {
	Jail   string // the container's jail
	Root   string // host path of the container's root
	Path   string // absolute path inside the container
	Args   []string
	Env    []string
	Dir    string // inside the container
	Cred   Credential
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Setsid bool
	// TTY makes Stdin, a terminal, the process's controlling terminal
	// (with Setsid).
	TTY bool
	// NetNS is the network namespace the process starts in (the spec's);
	// empty: the starter's own.
	NetNS string
}

// Process is a started process.
type Process interface {
	Pid() int
	Signal(sig syscall.Signal) error
	// Wait returns the exit code (128+n for signal n) and the signal's
	// name when one ended it.
	Wait() (code int, signal string, err error)
}

// Starter starts processes in containers: in a jail on FreeBSD
// (JailStarter), as plain host processes elsewhere (HostStarter).
type Starter interface {
	Start(p ProcSpec) (Process, error)
}

// StartError is a process that could not start; Permanent when waiting
// will not help (no such file, exec format error, permission denied).
type StartError struct {
	Err       error
	Permanent bool
}

func (e *StartError) Error() string { return e.Err.Error() }
func (e *StartError) Unwrap() error { return e.Err }

func classifyStart(err error) error {
	if err == nil {
		return nil
	}
	perm := errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOEXEC) ||
		errors.Is(err, syscall.EACCES) || errors.Is(err, exec.ErrNotFound) ||
		errors.Is(err, ErrNoSuchUser) || errors.Is(err, syscall.ENOTDIR)
	return &StartError{Err: err, Permanent: perm}
}

// execProcess wraps an exec.Cmd.
type execProcess struct{ cmd *exec.Cmd }

func (p execProcess) Pid() int { return p.cmd.Process.Pid }
func (p execProcess) Signal(sig syscall.Signal) error {
	return p.cmd.Process.Signal(sig)
}
func (p execProcess) Wait() (int, string, error) {
	err := p.cmd.Wait()
	ps := p.cmd.ProcessState
	if ps == nil {
		return -1, "", err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), SignalName(ws.Signal()), nil
	}
	return ps.ExitCode(), "", nil
}

// SignalName is the short name of a signal: TERM, KILL, ...
func SignalName(sig syscall.Signal) string {
	return strings.TrimPrefix(unix.SignalName(sig), "SIG")
}

// ParseSignal reads a signal by name (TERM, SIGTERM) or number.
func ParseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && n > 0 && n < 128 {
		return syscall.Signal(n), nil
	}
	return 0, fmt.Errorf("signal %q: expected a name such as TERM or a number", s)
}

// HostStarter runs the process on the host: chrooted into the root when
// Chroot is set, else in the host's tree (tests, and hosts without jails).
// It isolates nothing.
type HostStarter struct{ Chroot bool }

// Start implements Starter.
func (h HostStarter) Start(p ProcSpec) (Process, error) {
	cmd := &exec.Cmd{Path: p.Path, Args: p.Args, Env: p.Env, Dir: p.Dir,
		Stdin: p.Stdin, Stdout: p.Stdout, Stderr: p.Stderr}
	attr := &syscall.SysProcAttr{Setsid: p.Setsid || p.TTY, Setctty: p.TTY}
	if h.Chroot {
		attr.Chroot = p.Root
	} else {
		cmd.Path = filepath.Join(p.Root, p.Path)
		cmd.Dir = filepath.Join(p.Root, p.Dir)
	}
	if os.Getuid() == 0 {
		attr.Credential = &syscall.Credential{Uid: p.Cred.Uid, Gid: p.Cred.Gid, Groups: p.Cred.Groups}
	}
	cmd.SysProcAttr = attr
	if err := cmd.Start(); err != nil {
		return nil, classifyStart(err)
	}
	return execProcess{cmd}, nil
}

// MergeEnv lays env over base (KEY=VALUE lists), keeping base's order.
func MergeEnv(base []string, over ...[]string) []string {
	out := append([]string(nil), base...)
	idx := map[string]int{}
	for i, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		idx[k] = i
	}
	for _, l := range over {
		for _, kv := range l {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := idx[k]; ok {
				out[i] = kv
			} else {
				idx[k] = len(out)
				out = append(out, kv)
			}
		}
	}
	return out
}

func envValue(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, _ := strings.Cut(env[i], "="); k == key {
			return v, true
		}
	}
	return "", false
}

// DefaultPath is PATH for a container whose image sets none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ResolveCommand finds argv0 inside the root along PATH, as the shell in
// the container would; a name with a slash is taken as it is.
func ResolveCommand(root, argv0, pathEnv string) (string, error) {
	if strings.Contains(argv0, "/") {
		return argv0, nil
	}
	for _, dir := range strings.Split(pathEnv, ":") {
		if dir == "" || !path.IsAbs(dir) {
			continue
		}
		p := path.Join(dir, argv0)
		st, err := os.Lstat(filepath.Join(root, p))
		if err != nil {
			continue
		}
		if st.Mode()&fs.ModeSymlink != 0 || (st.Mode().IsRegular() && st.Mode()&0o111 != 0) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w (PATH=%s)", argv0, exec.ErrNotFound, pathEnv)
}

// ProcessFor prepares the container's process: its user from the image's
// databases, the image's environment under the spec's (plus HOME and PATH
// when neither sets them), its working directory and command.
func ProcessFor(spec ContainerSpec, argv []string, extraEnv []string, user, workdir string) (ProcSpec, error) {
	if len(argv) == 0 {
		return ProcSpec{}, &StartError{Err: errors.New("no command"), Permanent: true}
	}
	if user == "" {
		user = spec.User
	}
	cred, err := LookupUser(spec.Root.Path, user)
	if err != nil {
		return ProcSpec{}, classifyStart(err)
	}
	fileEnv, err := readEnvFile(spec.EnvFile)
	if err != nil {
		return ProcSpec{}, &StartError{Err: err}
	}
	env := MergeEnv(spec.ImageEnv, spec.Env, fileEnv, extraEnv)
	if _, ok := envValue(env, "PATH"); !ok {
		env = append(env, "PATH="+DefaultPath)
	}
	if _, ok := envValue(env, "HOME"); !ok {
		env = append(env, "HOME="+cred.Home)
	}
	pathEnv, _ := envValue(env, "PATH")
	p, err := ResolveCommand(spec.Root.Path, argv[0], pathEnv)
	if err != nil {
		return ProcSpec{}, classifyStart(err)
	}
	if workdir == "" {
		workdir = spec.WorkDir
	}
	if workdir == "" {
		workdir = "/"
	}
	return ProcSpec{Jail: jailName(spec), Root: spec.Root.Path, Path: p, Args: argv, Env: env, Dir: workdir, Cred: cred, NetNS: spec.NetNS}, nil
}

// Supervisor runs one container's process to its end: output to the log,
// the stop request honoured with the grace period, the jail removed when
// the main process ends, and the exit status written.
type Supervisor struct {
	Dir     string // the container's directory
	Starter Starter
	Runner  sys.Runner // removes the jail; nil for none (host processes)
	Clock   Clock
	// Kill ends whatever the process left behind when there is no jail
	// (HostStarter); nil to rely on removing the jail.
	Kill func(p Process)
}

// Run starts the process, reports the start (nil, or why it failed) on
// started, then waits for it, honouring stop requests. It returns the exit
// record written.
func (s *Supervisor) Run(ctx context.Context, stop <-chan struct{}, started func(error)) (ExitInfo, error) {
	clock := s.Clock
	if clock == nil {
		clock = RealClock{}
	}
	var rec Record
	if err := ReadJSON(filepath.Join(s.Dir, RecordFile), &rec); err != nil {
		started(err)
		return ExitInfo{}, err
	}
	var run RunInfo
	if err := ReadJSON(filepath.Join(s.Dir, RunFile), &run); err != nil {
		started(err)
		return ExitInfo{}, err
	}
	logf := &LogFile{Path: filepath.Join(s.Dir, LogFileName), Now: clock.Now}
	defer logf.Close()
	outW := &StreamWriter{Log: logf, Stream: StreamStdout}
	errW := &StreamWriter{Log: logf, Stream: StreamStderr}
	outR, outPipe, err := os.Pipe()
	if err != nil {
		started(err)
		return ExitInfo{}, err
	}
	errR, errPipe, err := os.Pipe()
	if err != nil {
		outR.Close()
		outPipe.Close()
		started(err)
		return ExitInfo{}, err
	}
	var copies sync.WaitGroup
	for _, c := range []struct {
		r *os.File
		w *StreamWriter
	}{{outR, outW}, {errR, errW}} {
		copies.Add(1)
		go func() {
			defer copies.Done()
			io.Copy(c.w, c.r)
			c.w.Close()
			c.r.Close()
		}()
	}
	ps, err := ProcessFor(rec.Spec, rec.Spec.Command, nil, "", "")
	var proc Process
	if err == nil {
		ps.Stdout, ps.Stderr, ps.Setsid = outPipe, errPipe, true
		proc, err = s.Starter.Start(ps)
	}
	outPipe.Close()
	errPipe.Close()
	if err != nil {
		copies.Wait()
		ei := ExitInfo{Code: ShimExitPermanent, FinishedAt: clock.Now(), Message: err.Error()}
		var se *StartError
		if !errors.As(err, &se) || !se.Permanent {
			ei.Code = ShimExitFailed
		}
		s.removeJail(ctx, rec)
		WriteJSON(filepath.Join(s.Dir, ExitFile), ei)
		started(err)
		return ei, err
	}
	run.ShimPid, run.Pid = os.Getpid(), proc.Pid()
	if err := WriteJSON(filepath.Join(s.Dir, RunFile), run); err != nil {
		proc.Signal(syscall.SIGKILL)
	}
	started(nil)

	type result struct {
		code int
		sig  string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		code, sig, err := proc.Wait()
		done <- result{code, sig, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-stop:
		grace := rec.Spec.Grace()
		var req StopRequest
		if ReadJSON(filepath.Join(s.Dir, StopFile), &req) == nil && req.Grace >= 0 {
			grace = req.Grace
		}
		proc.Signal(rec.Spec.Signal())
		select {
		case res = <-done:
		case <-clock.After(grace):
			s.end(ctx, rec, proc)
			res = <-done
		}
	}
	// Nothing the process left behind keeps running.
	s.end(ctx, rec, proc)
	copies.Wait()
	ei := ExitInfo{Code: res.code, Signal: res.sig, FinishedAt: clock.Now()}
	if res.err != nil {
		ei.Message = res.err.Error()
	}
	if err := WriteJSON(filepath.Join(s.Dir, ExitFile), ei); err != nil {
		return ei, err
	}
	return ei, nil
}

// end removes the jail, or kills what the process left on the host.
func (s *Supervisor) end(ctx context.Context, rec Record, proc Process) {
	if s.Kill != nil {
		s.Kill(proc)
	}
	s.removeJail(ctx, rec)
}

func (s *Supervisor) removeJail(ctx context.Context, rec Record) {
	if s.Runner == nil {
		return
	}
	_, err := sys.Run(ctx, s.Runner, "jail", "-R", rec.Jail) // without jail.conf, as removeJail
	if err != nil && !sys.IsExit(err, "not found") {
		fmt.Fprintf(os.Stderr, "jail-shim: remove jail %s: %v\n", rec.Jail, err)
	}
}

// KillGroup kills the process group a process leads (Setsid), for
// HostStarter: what the process left behind goes with it.
func KillGroup(p Process) { syscall.Kill(-p.Pid(), syscall.SIGKILL) }

// readEnvFile reads a JSON list of KEY=VALUE entries; no name, no entries.
func readEnvFile(name string) ([]string, error) {
	if name == "" {
		return nil, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("environment file: %w", err)
	}
	var env []string
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("environment file %s: expected a JSON list of KEY=VALUE: %w", name, err)
	}
	for _, e := range env {
		if !strings.Contains(e, "=") {
			return nil, fmt.Errorf("environment file %s: %q is not KEY=VALUE", name, e)
		}
	}
	return env, nil
}
