package daemon

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/procstat"
)

// BenchmarkNodeMemory measures the resident memory of a one-node cluster
// (`legion up`: the manager and the agent in one process, on the process
// platform with the loopback pod network) idle and running a service of
// the test server with 100 and then 1,000 tasks. The node is the legion
// binary built from this tree, in a process of its own, so neither the
// benchmark's memory nor its clients' is counted; nor are the pods': each
// container is a process of its own under a supervisor process of its own
// (`legion process-shim`), and neither is the node's. rss-MB is the
// node's VmRSS, the largest of the readings taken over the settle time
// once every task runs and is ready; resolver-rss-MB is the node
// resolver's (`legion node-resolver`, a process of its own too). cpu-%
// is the node's CPU over the settle time, in percent of one core.
//
// A node's pods take the addresses of its /24 (253), so at 1,000 tasks
// the node runs 250 and three simulated worker nodes in the benchmark's
// process (simNode: joined with the worker token, real dispatcher
// sessions, no pods) the other 750: the manager holds all 1,000, its
// dispatcher serves four nodes, and its agent runs 250 pods. node-tasks
// says how many the node itself runs.
//
// Run it with -benchtime 1x; each sub-benchmark goes on from the last on
// the same node:
//
//	go test ./internal/daemon -run '^$' -bench NodeMemory -benchtime 1x
func BenchmarkNodeMemory(b *testing.B) {
	if runtime.GOOS != "linux" {
		b.Skip("reads /proc")
	}
	n := startUpProcess(b)
	for _, tasks := range []int{0, 100, 1000} {
		b.Run(fmt.Sprintf("tasks=%d", tasks), func(b *testing.B) {
			// A node's pods take addresses of its /24: past 250, the
			// tasks go to simulated nodes, three for 1,000 (so the node
			// itself runs 250 of them).
			for len(n.sims) < (tasks-1)/memPodsPerNode {
				n.sims = append(n.sims, startSimNode(b, n, fmt.Sprintf("sim-%d", len(n.sims)+1)))
			}
			if tasks > 0 {
				applyText(b, n.cl, memService(tasks))
			}
			poll(b, fmt.Sprintf("%d ready tasks", tasks), 20*time.Minute, func() bool {
				return len(readyOf(b, n.cl, "default", "mem")) == tasks
			})
			local := localTasks(b, n)
			for b.Loop() {
				cpu0 := procCPU(b, n.cmd.Process.Pid)
				rss, res := n.settle(b, memSettle)
				b.ReportMetric(float64(local), "node-tasks")
				b.ReportMetric(rss, "rss-MB")
				b.ReportMetric(res, "resolver-rss-MB")
				b.ReportMetric(100*(procCPU(b, n.cmd.Process.Pid)-cpu0).Seconds()/memSettle.Seconds(), "cpu-%")
			}
		})
	}
}

// memSettle is how long the memory benchmark reads the node's memory
// once its tasks run: a few heartbeats and controller passes.
const memSettle = 10 * time.Second

// memPodsPerNode is how many pods the benchmark gives a node: its /24
// holds 253.
const memPodsPerNode = 250

// localTasks counts the running tasks of the benchmark's service that the
// node itself runs.
func localTasks(t testing.TB, u *upProcess) int {
	n := 0
	for _, task := range readyOf(t, u.cl, "default", "mem") {
		if !strings.HasPrefix(task.Spec.Node, "sim-") {
			n++
		}
	}
	return n
}

// memService is a service of n replicas of the test server, each probed
// for readiness every 5 s.
func memService(n int) string {
	return testPod("Service", "mem", "web", listen8080, fmt.Sprintf("replicas: %d", n)) + servesHTTP("5s")
}

// upProcess is `legion up` run from a binary built from this tree.
type upProcess struct {
	cmd  *exec.Cmd
	cl   *client.Client
	api  string
	data string
	sims []*simNode
}

// buildLegion compiles cmd/legion once per benchmark run into dir, or
// takes $LEGION_LAB_BINARY.
func buildLegion(t testing.TB, dir string) string {
	t.Helper()
	if p := os.Getenv("LEGION_LAB_BINARY"); p != "" {
		return p
	}
	bin := filepath.Join(dir, "legion")
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "../../cmd/legion")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building legion: %v\n%s", err, out)
	}
	return bin
}

var upLine = regexp.MustCompile(`Legion is up: node \S+, API (\S+) \(credentials (\S+)\)`)

// startUpProcess runs `legion up` on a directory holding the test image
// archive (so it loads the image and applies nothing) and waits for it
// to say it is up.
func startUpProcess(t testing.TB) *upProcess {
	t.Helper()
	dir := t.TempDir()
	bin := buildLegion(t, dir)
	deploy := filepath.Join(dir, "deploy")
	if err := os.MkdirAll(deploy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(testImageArchive(t), filepath.Join(deploy, "server.oci.tar")); err != nil {
		t.Fatal(err)
	}
	u := &upProcess{data: filepath.Join(dir, "data")}
	u.cmd = exec.Command(bin, "up", deploy, "--data-dir", u.data, "--listen", "127.0.0.1:0", "--dns-listen", "127.0.0.1:0",
		"--platform", PlatformProcess, "--pod-network", PodNetworkLoopback)
	u.cmd.Env = append(os.Environ(), "HOME="+dir) // up remembers the cluster in the user's contexts
	out, err := u.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	u.cmd.Stderr = io.Discard
	t.Cleanup(func() {
		if u.cl != nil {
			u.cl.Close()
		}
		if u.cmd.Process != nil {
			// SIGTERM removes its pods; a node that does not stop is
			// killed and what it left removed here.
			u.cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { u.cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Minute):
				u.cmd.Process.Kill()
				<-done
				t.Error("legion up did not stop within 2 minutes of SIGTERM")
			}
		}
		removeAllPods(t, u.data)
	})
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	var said []string
	deadline := time.After(2 * time.Minute)
	for u.cl == nil {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("legion up ended: %s", strings.Join(said, "\n"))
			}
			said = append(said, l)
			if m := upLine.FindStringSubmatch(l); m != nil {
				u.api = m[1]
				if u.cl, err = client.New(client.Options{Server: m[1], CredentialsFile: m[2]}); err != nil {
					t.Fatal(err)
				}
			}
		case <-deadline:
			t.Fatalf("legion up not up within 2 minutes: %s", strings.Join(said, "\n"))
		}
	}
	// Up applies nothing, but loads the image after it says it is up.
	poll(t, "the test image loaded", time.Minute, func() bool {
		for _, l := range said {
			if strings.HasPrefix(l, "No objects to apply") {
				return true
			}
		}
		select {
		case l, ok := <-lines:
			if ok {
				said = append(said, l)
			}
		default:
		}
		return false
	})
	return u
}

// settle reads the node's and its resolver's resident memory for d and
// returns the largest readings, in MB.
func (u *upProcess) settle(t testing.TB, d time.Duration) (node, resolver float64) {
	t.Helper()
	pid := u.cmd.Process.Pid
	res := resolverPid(u.data)
	for end := time.Now().Add(d); time.Now().Before(end); {
		kb, err := vmRSS(pid)
		if err != nil {
			t.Fatalf("the node's memory: %v", err)
		}
		node = max(node, float64(kb)/1024)
		if res > 0 {
			if kb, err := vmRSS(res); err == nil {
				resolver = max(resolver, float64(kb)/1024)
			}
		}
		time.Sleep(250 * time.Millisecond) // a reading every quarter second, not a wait for a condition
	}
	return node, resolver
}

// procCPU is the CPU time a process has used.
func procCPU(t testing.TB, pid int) time.Duration {
	t.Helper()
	st, err := procstat.Read(pid)
	if err != nil {
		t.Fatal(err)
	}
	return st.CPU()
}

// vmRSS is a process's resident set in kB.
func vmRSS(pid int) (int64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// resolverPid finds the node resolver the node of dataDir started (it
// watches that directory), 0 when there is none.
func resolverPid(dataDir string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if len(args) > 1 && args[1] == "node-resolver" && strings.Contains(string(cmdline), "\x00--watch\x00"+dataDir) {
			return pid
		}
	}
	return 0
}
