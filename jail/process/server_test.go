package process_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/procstat"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testimage"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
)

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// serverRoot unpacks the test image's layer into a fresh directory, as the
// image store's directory backend would: the static server at /app/server,
// /etc/passwd and /etc/group naming app (1000) and web (1001), and /tmp.
func serverRoot(t *testing.T, server []byte) string {
	t.Helper()
	layer, err := testimage.LayerTar(server)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, hdr.Name)
		if hdr.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, os.FileMode(hdr.Mode&0o777)|modeBits(hdr.Mode))
			continue
		}
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, data, os.FileMode(hdr.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func modeBits(m int64) os.FileMode {
	if m&0o1000 != 0 {
		return os.ModeSticky
	}
	return 0
}

// poll calls f every 10 ms until it reports done or the deadline passes.
func poll(t *testing.T, what string, f func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		ok, state := f()
		if ok {
			return
		}
		last = state
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s: not reached within 20s; last: %s", what, last)
}

func get(url string) (int, string, error) {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), nil
}

func logTexts(t *testing.T, r jail.Runtime, id string) []string {
	t.Helper()
	rc, err := r.Logs(testCtx(t), id, jail.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	var out []string
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" {
			continue
		}
		rec, err := jail.ParseRecord(line)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec.Stream+":"+rec.Text)
	}
	return out
}

// alive reports whether pid runs (a zombie counts as gone).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	st, err := procstat.Read(pid)
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) || !isLinuxProc()
	}
	return !st.Zombie
}

// shellSpec is a container of the host's /bin/sh running script.
func shellSpec(id, script string) jail.ContainerSpec {
	return jail.ContainerSpec{ID: id, Command: []string{"/bin/sh", "-c", script},
		ImageEnv: []string{"PATH=/bin:/usr/bin"}, Root: jail.Root{Path: "/"}}
}

func isLinuxProc() bool { _, err := os.Stat("/proc/self/stat"); return err == nil }

// A daemon killed with SIGKILL leaves its containers running under their
// supervisors; a new runtime on its data directory adopts them.
func TestContainerSurvivesDaemonKill(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(exe)
	daemon.Env = append(os.Environ(), "LEGION_TEST_DAEMON="+dir)
	out, err := daemon.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "started\n" {
		daemon.Process.Kill()
		daemon.Wait()
		t.Fatalf("daemon said %q (%v), want started", line, err)
	}
	if err := daemon.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	daemon.Wait()

	r := newRuntime(t, dir)
	t.Cleanup(func() { r.Remove(context.Background(), "survivor") })
	st, err := r.Inspect(testCtx(t), "survivor")
	if err != nil || st.State != jail.StateRunning || !alive(st.Pid) {
		t.Fatalf("after the daemon's death: %+v %v, want running", st, err)
	}
	// Adopted for good: exec, logs and stop work from the new runtime.
	var buf bytes.Buffer
	if code, err := r.Exec(testCtx(t), "survivor", jail.ExecSpec{Command: []string{"/bin/sh", "-c", "echo adopted"}, Stdout: &buf}); err != nil || code != 0 || buf.String() != "adopted\n" {
		t.Fatalf("exec in the adopted container: %d %v %q", code, err, buf.String())
	}
	// An exec that outlives its context is killed, with the context's error.
	short, cancel := context.WithTimeout(testCtx(t), 100*time.Millisecond)
	defer cancel()
	if _, err := r.Exec(short, "survivor", jail.ExecSpec{Command: []string{"/bin/sh", "-c", "sleep 600"}}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("exec past its deadline: %v, want DeadlineExceeded", err)
	}
	if got := logTexts(t, r, "survivor"); !slices.Equal(got, []string{"stdout:ready"}) {
		t.Fatalf("logs %q", got)
	}
	if err := r.Stop(testCtx(t), "survivor", time.Second); err != nil {
		t.Fatal(err)
	}
	if st, _ := r.Inspect(testCtx(t), "survivor"); st.State != jail.StateExited || st.Signal != "TERM" {
		t.Fatalf("after stop: %+v, want ended by TERM", st)
	}
}

// Containers of the test image, run for real: chrooted into their root as
// the image's user when the tests run as root.
func TestServerImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "server")
	// A cold build cache compiles the standard library for CGO_ENABLED=0
	// first: minutes on a busy machine, a second once cached.
	build, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := testimage.BuildServer(build, bin, "", ""); err != nil {
		t.Fatal(err)
	}
	server, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	asRoot := os.Geteuid() == 0
	spec := func(t *testing.T, id string, args ...string) jail.ContainerSpec {
		return jail.ContainerSpec{ID: id, Labels: map[string]string{"test": "server"},
			Command:  append([]string{"server"}, args...),
			ImageEnv: []string{"PATH=/app", "NAME=image"}, User: "app", WorkDir: "/app",
			Root: jail.Root{Path: serverRoot(t, server)}, StopGrace: 5 * time.Second}
	}
	cleanup := func(t *testing.T, r *process.Runtime) {
		t.Cleanup(func() {
			l, _ := r.List(context.Background(), nil)
			for _, c := range l {
				r.Remove(context.Background(), c.ID)
			}
		})
	}

	t.Run("UserWorkDirAndChroot", func(t *testing.T) {
		if !asRoot {
			t.Skip("chroot and the image's user need root")
		}
		r := newRuntime(t, t.TempDir())
		cleanup(t, r)
		for _, tc := range []struct{ user, want string }{
			{"app", "uid=1000 gid=1000 cwd=/app"},
			{"app:web", "uid=1000 gid=1001 cwd=/app"},
			{"1000:1001", "uid=1000 gid=1001 cwd=/app"},
			{"4242", "uid=4242 gid=0 cwd=/app"},
			{"", "uid=0 gid=0 cwd=/app"},
		} {
			id := "who" + strconv.Itoa(len(tc.user)) + strings.NewReplacer(":", "-").Replace(tc.user)
			sp := spec(t, id, "-whoami", "-exit", "0")
			sp.User = tc.user
			if err := r.Create(testCtx(t), sp); err != nil {
				t.Fatal(err)
			}
			if err := r.Start(testCtx(t), id); err != nil {
				t.Fatalf("user %q: %v", tc.user, err)
			}
			poll(t, "exit of "+id, func() (bool, string) {
				st, _ := r.Inspect(testCtx(t), id)
				return st.State == jail.StateExited, string(st.State)
			})
			if got := logTexts(t, r, id); !slices.Equal(got, []string{"stdout:" + tc.want}) {
				t.Errorf("user %q: output %q, want %q", tc.user, got, tc.want)
			}
		}
		sp := spec(t, "nouser", "-exit", "0")
		sp.User = "nobody"
		if err := r.Create(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(testCtx(t), "nouser"); !errors.Is(err, jail.ErrPermanent) || !strings.Contains(err.Error(), "nobody") {
			t.Fatalf("start as a user the image lacks: %v, want ErrPermanent naming the user", err)
		}
	})

	t.Run("ServeExecStopAndAdopt", func(t *testing.T) {
		dataDir := t.TempDir()
		r := newRuntime(t, dataDir)
		cleanup(t, r)
		port := testaddr.Port(t)
		sp := spec(t, "web", "-listen", "127.0.0.1:"+strconv.Itoa(port))
		sp.Env = []string{"NAME=spec"}
		if err := r.Create(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(testCtx(t), "web"); err != nil {
			t.Fatal(err)
		}
		base := "http://127.0.0.1:" + strconv.Itoa(port)
		poll(t, "server answers", func() (bool, string) {
			code, body, err := get(base + "/")
			return code == 200 && body == "spec", fmt.Sprint(code, body, err)
		})
		// Without NAME it answers with its HOSTNAME: the container's id.
		if code, body, err := get(base + "/env/HOSTNAME"); code != 200 || body != "web" {
			t.Fatalf("HOSTNAME in the container: %d %q %v, want the container id", code, body, err)
		}
		// The supervisor is detached: its own session, not our child.
		st, err := r.Inspect(testCtx(t), "web")
		if err != nil || st.State != jail.StateRunning || st.Pid == 0 {
			t.Fatalf("inspect: %+v %v", st, err)
		}
		var run jail.RunInfo
		if err := jail.ReadJSON(filepath.Join(r.Dir("web"), jail.RunFile), &run); err != nil {
			t.Fatal(err)
		}
		if sid, _ := unixGetsid(run.ShimPid); sid != run.ShimPid {
			t.Errorf("supervisor %d: session %d, want its own", run.ShimPid, sid)
		}
		if sid, _ := unixGetsid(st.Pid); sid != st.Pid {
			t.Errorf("container process %d: session %d, want its own (killed as a group)", st.Pid, sid)
		}

		// Exec runs in the container's root: the file it makes is the
		// one the server sees, and it lands inside the root on the host.
		var out bytes.Buffer
		code, err := r.Exec(testCtx(t), "web", jail.ExecSpec{Command: []string{"server", "-touch", "/tmp/unready", "-say", "x"}, Stdout: &out})
		if err != nil || code != 0 {
			t.Fatalf("exec touch: code %d err %v", code, err)
		}
		if _, err := os.Stat(filepath.Join(sp.Root.Path, "tmp/unready")); err != nil {
			t.Fatalf("exec's file not in the container's root: %v", err)
		}
		if code, _, _ := get(base + "/ready"); code != http.StatusServiceUnavailable {
			t.Fatalf("/ready after touching /tmp/unready: %d, want 503", code)
		}
		code, err = r.Exec(testCtx(t), "web", jail.ExecSpec{Command: []string{"server", "-exit", "3"}})
		if err != nil || code != 3 {
			t.Fatalf("exec -exit 3: code %d err %v", code, err)
		}
		if _, err := r.Exec(testCtx(t), "web", jail.ExecSpec{Command: []string{"no-such-program"}}); !errors.Is(err, jail.ErrPermanent) {
			t.Fatalf("exec of a missing program: %v, want ErrPermanent", err)
		}

		u, err := r.Usage(testCtx(t), "web")
		if err != nil || u.Processes != 1 {
			t.Fatalf("usage: %+v %v, want one process", u, err)
		}
		if isLinuxProc() && (u.MemoryBytes <= 0 || u.OpenFiles < 3) {
			t.Fatalf("usage from /proc: %+v, want memory and open files", u)
		}

		// A new runtime on the same data directory (the daemon
		// restarted) finds the container running, same process, and
		// stops it.
		r2 := newRuntime(t, dataDir)
		st2, err := r2.Inspect(testCtx(t), "web")
		if err != nil || st2.State != jail.StateRunning || st2.Pid != st.Pid {
			t.Fatalf("adopted: %+v %v, want running pid %d", st2, err, st.Pid)
		}
		if err := r2.Stop(testCtx(t), "web", -1); err != nil {
			t.Fatal(err)
		}
		st3, err := r2.Inspect(testCtx(t), "web")
		if err != nil || st3.State != jail.StateExited || st3.ExitCode != 0 {
			t.Fatalf("after stop: %+v %v, want exit 0 (the server's own SIGTERM handling)", st3, err)
		}
		if got := logTexts(t, r2, "web"); !slices.Contains(got, "stdout:stopping") {
			t.Fatalf("logs %q: want the server's stopping line", got)
		}
		if alive(st.Pid) {
			t.Fatalf("after stop: process %d still alive", st.Pid)
		}
		// The supervisor ends just after writing the exit record.
		poll(t, "supervisor gone", func() (bool, string) { return !alive(run.ShimPid), "alive" })
	})

	t.Run("MountsAndDev", func(t *testing.T) {
		if !asRoot {
			t.Skip("mounts need root")
		}
		r := newRuntime(t, t.TempDir())
		cleanup(t, r)
		secrets := t.TempDir()
		if err := os.WriteFile(filepath.Join(secrets, "token"), []byte("s3cret"), 0o644); err != nil {
			t.Fatal(err)
		}
		single := filepath.Join(t.TempDir(), "app.conf")
		if err := os.WriteFile(single, []byte("debug=1"), 0o644); err != nil {
			t.Fatal(err)
		}
		sp := spec(t, "mounted", "-listen", "127.0.0.1:"+strconv.Itoa(testaddr.Port(t)))
		sp.Mounts = []jail.Mount{
			{Kind: jail.MountTmpfs, Target: "/run"},
			{Kind: jail.MountNullfs, Source: secrets, Target: "/run/secrets", ReadOnly: true},
			{Kind: jail.MountNullfs, Source: single, Target: "/etc/app.conf", ReadOnly: true},
			{Kind: jail.MountTmpfs, Target: "/scratch"},
		}
		if err := r.Create(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(testCtx(t), "mounted"); err != nil {
			t.Fatal(err)
		}
		execOut := func(args ...string) (int, string) {
			var out, errb bytes.Buffer
			code, err := r.Exec(testCtx(t), "mounted", jail.ExecSpec{Command: append([]string{"server"}, args...), Stdout: &out, Stderr: &errb})
			if err != nil {
				t.Fatalf("exec %q: %v", args, err)
			}
			return code, out.String() + errb.String()
		}
		for _, tc := range []struct {
			args []string
			code int
			out  string
		}{
			{[]string{"-cat", "/run/secrets/token"}, 0, "s3cret"},
			{[]string{"-cat", "/etc/app.conf"}, 0, "debug=1"},
			{[]string{"-cat", "/dev/null"}, 0, ""},
			{[]string{"-touch", "/run/secrets/new"}, 1, "open /run/secrets/new: read-only file system\n"},
			{[]string{"-touch", "/scratch/new"}, 0, ""},
		} {
			code, out := execOut(tc.args...)
			if code != tc.code || out != tc.out {
				t.Errorf("server %q as app: code %d output %q, want %d %q", tc.args, code, out, tc.code, tc.out)
			}
		}
		if err := r.Remove(testCtx(t), "mounted"); err != nil {
			t.Fatal(err)
		}
		// Gone from the root, kept at their sources.
		for _, p := range []string{"run/secrets/token", "dev/null", "scratch/new"} {
			if _, err := os.Lstat(filepath.Join(sp.Root.Path, p)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s in the root after remove: %v, want gone with its mount", p, err)
			}
		}
		if data, err := os.ReadFile(filepath.Join(secrets, "token")); err != nil || string(data) != "s3cret" {
			t.Fatalf("source after remove: %q %v", data, err)
		}
		if err := os.RemoveAll(sp.Root.Path); err != nil {
			t.Fatalf("remove the root after the container: %v", err)
		}
		if data, err := os.ReadFile(single); err != nil || string(data) != "debug=1" {
			t.Fatalf("single-file source after removing the root: %q %v", data, err)
		}
	})

	t.Run("LogRotatesKeepingOneOldFile", func(t *testing.T) {
		r := newRuntime(t, t.TempDir())
		cleanup(t, r)
		// 150 000 records of about 140 bytes: past 16 MiB, so the oldest go.
		line := strings.Repeat("x", 92) + "-line"
		sp := spec(t, "chatty", "-say", line, "-repeat", "150000", "-exit", "0")
		if err := r.Create(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(testCtx(t), "chatty"); err != nil {
			t.Fatal(err)
		}
		poll(t, "exit", func() (bool, string) {
			st, _ := r.Inspect(testCtx(t), "chatty")
			return st.State == jail.StateExited, string(st.State)
		})
		log := filepath.Join(r.Dir("chatty"), jail.LogFileName)
		cur, err1 := os.Stat(log)
		old, err2 := os.Stat(log + ".1")
		if err1 != nil || err2 != nil {
			t.Fatalf("log files: %v %v, want log and log.1", err1, err2)
		}
		if old.Size() > jail.LogRotateSize || cur.Size() > jail.LogRotateSize || old.Size() < jail.LogRotateSize-200 {
			t.Fatalf("log.1 %d bytes, log %d bytes: want the old one full to %d and both within it", old.Size(), cur.Size(), jail.LogRotateSize)
		}
		got := logTexts(t, r, "chatty")
		perRecord := len(jail.FormatRecord(jail.LogRecord{Time: time.Now(), Stream: "stdout", Text: line})) - 5 // times vary in length
		if want := int(old.Size()+cur.Size()) / perRecord; len(got) < want*9/10 || len(got) >= 150000 {
			t.Fatalf("records from both files: %d, want about %d (the oldest rotated away)", len(got), want)
		}
		for i, g := range got {
			if g != "stdout:"+line {
				t.Fatalf("record %d: %q", i, g)
			}
		}
	})

	t.Run("PermanentFailures", func(t *testing.T) {
		r := newRuntime(t, t.TempDir())
		cleanup(t, r)
		for _, tc := range []struct {
			id      string
			command string
			file    []byte
			mode    os.FileMode
		}{
			{"notfound", "missing", nil, 0},
			{"notexec", "/app/data", []byte("#!/bin/sh\n"), 0o644},
			{"badformat", "/app/garbage", []byte("\x00\x01\x02 not a program"), 0o755},
		} {
			sp := spec(t, tc.id)
			sp.Command = []string{tc.command}
			if tc.file != nil {
				if err := os.WriteFile(filepath.Join(sp.Root.Path, tc.command), tc.file, tc.mode); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Create(testCtx(t), sp); err != nil {
				t.Fatal(err)
			}
			err := r.Start(testCtx(t), tc.id)
			if !errors.Is(err, jail.ErrPermanent) {
				t.Errorf("%s: start: %v, want ErrPermanent", tc.id, err)
				continue
			}
			st, _ := r.Inspect(testCtx(t), tc.id)
			if st.State != jail.StateExited || st.Message == "" {
				t.Errorf("%s: after the failed start %+v, want exited with a message", tc.id, st)
			}
		}
	})

	t.Run("StopKillsTheProcessGroup", func(t *testing.T) {
		r := newRuntime(t, t.TempDir())
		cleanup(t, r)
		// The host's sh: a child left in the background must go too.
		sp := shellSpec("group", "trap '' TERM; sleep 600 & echo $!; wait")
		if err := r.Create(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(testCtx(t), "group"); err != nil {
			t.Fatal(err)
		}
		var child int
		poll(t, "child pid in the log", func() (bool, string) {
			l := logTexts(t, r, "group")
			if len(l) == 0 {
				return false, "no output"
			}
			child, _ = strconv.Atoi(strings.TrimPrefix(l[0], "stdout:"))
			return child > 0, l[0]
		})
		if !alive(child) {
			t.Fatalf("child %d not running before the stop", child)
		}
		if err := r.Stop(testCtx(t), "group", 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		st, _ := r.Inspect(testCtx(t), "group")
		if st.State != jail.StateExited || st.Signal != "KILL" {
			t.Fatalf("after stop: %+v, want killed after the grace", st)
		}
		poll(t, "background child gone", func() (bool, string) { return !alive(child), "alive" })
	})

	t.Run("SupervisorKilledLeavesNoOrphan", func(t *testing.T) {
		r := newRuntime(t, t.TempDir())
		cleanup(t, r)
		sp := shellSpec("orphan", "echo ready; sleep 600 & wait")
		if err := r.Create(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(testCtx(t), "orphan"); err != nil {
			t.Fatal(err)
		}
		var run jail.RunInfo
		if err := jail.ReadJSON(filepath.Join(r.Dir("orphan"), jail.RunFile), &run); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(run.ShimPid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		poll(t, "supervisor gone", func() (bool, string) { return !alive(run.ShimPid), "alive" })
		st, err := r.Inspect(testCtx(t), "orphan")
		if err != nil || st.State != jail.StateExited || !strings.Contains(st.Message, "supervisor gone") {
			t.Fatalf("after the supervisor's death: %+v %v", st, err)
		}
		if !alive(run.Pid) {
			t.Fatalf("container process %d died with its supervisor; this test needs it left", run.Pid)
		}
		if err := r.Stop(testCtx(t), "orphan", time.Second); err != nil {
			t.Fatal(err)
		}
		poll(t, "orphaned process killed", func() (bool, string) { return !alive(run.Pid), "alive" })
		st, _ = r.Inspect(testCtx(t), "orphan")
		if st.State != jail.StateExited || st.Signal != "KILL" {
			t.Fatalf("after stop: %+v, want killed", st)
		}
	})

	t.Run("StopWithoutSupervisorKills", func(t *testing.T) {
		exe, _ := os.Executable()
		r, err := process.New(process.Config{DataDir: t.TempDir(), Shim: exe, ShimMargin: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		cleanup(t, r)
		sp := shellSpec("frozen", "echo ready; sleep 600 & wait")
		if err := r.Create(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		if err := r.Start(testCtx(t), "frozen"); err != nil {
			t.Fatal(err)
		}
		var run jail.RunInfo
		if err := jail.ReadJSON(filepath.Join(r.Dir("frozen"), jail.RunFile), &run); err != nil {
			t.Fatal(err)
		}
		// A supervisor that cannot answer: the runtime acts itself.
		if err := syscall.Kill(run.ShimPid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if err := r.Stop(testCtx(t), "frozen", 100*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		st, _ := r.Inspect(testCtx(t), "frozen")
		if st.State != jail.StateExited || st.Signal != "KILL" || !strings.Contains(st.Message, "no exit status") {
			t.Fatalf("after stop: %+v, want killed by the runtime", st)
		}
		poll(t, "process and supervisor gone", func() (bool, string) {
			return !alive(run.Pid) && !alive(run.ShimPid), fmt.Sprint(alive(run.Pid), alive(run.ShimPid))
		})
	})

	t.Run("RebootEndsRunsAndPods", func(t *testing.T) {
		r := newRuntime(t, t.TempDir())
		cleanup(t, r)
		infra := jail.ContainerSpec{ID: "pod1", Infra: true, Annotations: map[string]string{process.AnnotationPodAddress: "127.200.0.5"}}
		if err := r.Create(testCtx(t), infra); err != nil {
			t.Fatal(err)
		}
		st, err := r.Inspect(testCtx(t), "pod1")
		if err != nil || st.State != jail.StateRunning || st.Annotations[process.AnnotationPodAddress] != "127.200.0.5" {
			t.Fatalf("pod: %+v %v, want running with its address", st, err)
		}
		sp := spec(t, "member")
		sp.Pod = "pod1"
		if err := r.Create(testCtx(t), sp); err != nil {
			t.Fatal(err)
		}
		// A run recorded under another boot, its supervisor's pid taken
		// by a live process (ours): over all the same.
		if err := jail.WriteJSON(filepath.Join(r.Dir("member"), jail.RunFile),
			jail.RunInfo{Boot: 1, StartedAt: time.Now(), ShimPid: os.Getpid(), Pid: os.Getpid()}); err != nil {
			t.Fatal(err)
		}
		st, err = r.Inspect(testCtx(t), "member")
		if err != nil || st.State != jail.StateExited || !strings.Contains(st.Message, "reboot") {
			t.Fatalf("run from another boot: %+v %v, want exited by a reboot", st, err)
		}
		var rec jail.Record
		if err := jail.ReadJSON(filepath.Join(r.Dir("pod1"), jail.RecordFile), &rec); err != nil {
			t.Fatal(err)
		}
		rec.MountBoot = 1
		if err := jail.WriteJSON(filepath.Join(r.Dir("pod1"), jail.RecordFile), rec); err != nil {
			t.Fatal(err)
		}
		if st, _ := r.Inspect(testCtx(t), "pod1"); st.State != jail.StateExited {
			t.Fatalf("pod from another boot: %+v, want exited", st)
		}
	})
}
