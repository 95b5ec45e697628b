package packaging

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/legionbsd/legion/internal/golden"
)

const portDir = "freebsd/sysutils/legion"

// rcHost is a directory standing in for a FreeBSD host's rc.conf, /var
// and the port's installed script, with the script rewritten only where
// the port framework and the test must: %%PREFIX%% as the port sets it,
// and rc.subr the test's stand-in (testdata/rc.subr).
type rcHost struct {
	t      *testing.T
	dir    string
	script string
}

func newRCHost(t *testing.T) *rcHost {
	t.Helper()
	h := &rcHost{t: t, dir: t.TempDir()}
	src, err := os.ReadFile(filepath.Join(portDir, "files", "legion.in"))
	if err != nil {
		t.Fatal(err)
	}
	subr, err := filepath.Abs("testdata/rc.subr")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(src), "%%PREFIX%%", "/usr/local")
	if !strings.Contains(s, ". /etc/rc.subr\n") {
		t.Fatal("the rc script does not source /etc/rc.subr")
	}
	s = strings.Replace(s, ". /etc/rc.subr\n", ". "+subr+"\n", 1)
	h.script = filepath.Join(h.dir, "legion")
	if err := os.WriteFile(h.script, []byte(s), 0o755); err != nil {
		t.Fatal(err)
	}
	// Whatever a failed step leaves running is stopped.
	t.Cleanup(func() {
		if b, err := os.ReadFile(h.path("legion.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	return h
}

func (h *rcHost) path(name string) string { return filepath.Join(h.dir, name) }

// rcConf writes the host's rc.conf.
func (h *rcHost) rcConf(lines ...string) {
	h.t.Helper()
	if err := os.WriteFile(h.path("rc.conf"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// service runs `service legion arg` and returns what it printed and its
// exit code, as a transcript entry.
func (h *rcHost) service(arg string) string {
	h.t.Helper()
	stubs, err := filepath.Abs("testdata")
	if err != nil {
		h.t.Fatal(err)
	}
	cmd := exec.Command("sh", h.script, arg)
	cmd.Env = append(os.Environ(), "RC_CONF="+h.path("rc.conf"), "DAEMON_LOG="+h.path("daemon.log"),
		"PATH="+stubs+string(os.PathListSeparator)+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatal(err)
	}
	return fmt.Sprintf("$ service legion %s\n%s[exit %d]\n", arg, out, code)
}

// pid is what the pid file names, or 0.
func (h *rcHost) pid() int {
	b, err := os.ReadFile(h.path("legion.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// TestRCScriptCommands runs the port's rc.d script under sh, with a
// stand-in rc.subr and a stub daemon(8), through what an operator does:
// start while not enabled, enable and start, start again, status, stop,
// status and stop again. The transcript, with the commands daemon(8) was
// given, is the golden file: the node's own flags after `legion daemon`
// (not before daemon(8)'s), the data directory made for its owner only,
// and stop only signalling the supervisor (the pods run on).
func TestRCScriptCommands(t *testing.T) {
	t.Parallel()
	h := newRCHost(t)
	var tr strings.Builder
	h.rcConf()
	tr.WriteString(h.service("start"))
	h.rcConf(`legion_enable="YES"`,
		`legion_flags="--advertise 192.0.2.10:7470 --ext-if em0"`,
		`legion_data_dir="`+h.path("db")+`"`,
		`legion_log="`+h.path("legion.log")+`"`,
		`legion_pidfile="`+h.path("legion.pid")+`"`)
	tr.WriteString(h.service("start"))
	started := h.pid()
	if started == 0 || syscall.Kill(started, 0) != nil {
		t.Fatalf("after start no supervisor runs (pid file says %d)", started)
	}
	if fi, err := os.Stat(h.path("db")); err != nil || !fi.IsDir() {
		t.Fatalf("the data directory was not made: %v", err)
	}
	tr.WriteString(h.service("start"))
	tr.WriteString(h.service("status"))
	tr.WriteString(h.service("stop"))
	if syscall.Kill(started, 0) == nil {
		t.Fatalf("the supervisor (pid %d) still runs after stop", started)
	}
	tr.WriteString(h.service("status"))
	tr.WriteString(h.service("stop"))
	tr.WriteString(h.service("onestart"))
	tr.WriteString(h.service("onestop"))
	log, err := os.ReadFile(h.path("daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	tr.WriteString("--- commands run\n")
	tr.Write(log)

	got := tr.String()
	// The pids and the temporary directory change from run to run.
	got = strings.ReplaceAll(got, h.dir, "HOST")
	for _, pid := range []int{started, h.pidOfOnestart(got)} {
		if pid != 0 {
			got = strings.ReplaceAll(got, strconv.Itoa(pid), "PID")
		}
	}
	golden.Check(t, "testdata/rcd.golden", got)
}

// pidOfOnestart finds the pid the onestart/onestop pair used, from the
// transcript's "Waiting for PIDS: N." lines other than the first stop's.
func (h *rcHost) pidOfOnestart(tr string) int {
	var last int
	for _, line := range strings.Split(tr, "\n") {
		if s, ok := strings.CutPrefix(line, "Waiting for PIDS: "); ok {
			last, _ = strconv.Atoi(strings.TrimSuffix(s, "."))
		}
	}
	return last
}
