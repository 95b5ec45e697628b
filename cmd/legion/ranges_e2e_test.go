package main

import (
	"bufio"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testcluster"
	"github.com/legionbsd/legion/netbsd/loopback"
)

// helloOnFreePort is a copy of examples/hello publishing on a free port
// rather than 8080, which a user's own cluster may hold.
func helloOnFreePort(t *testing.T) (dir string, port int) {
	t.Helper()
	port = testaddr.Port(t)
	data, err := os.ReadFile("../../examples/hello/hello.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(string(data), "publishedPort: 8080", "publishedPort: "+strconv.Itoa(port), 1)
	if manifest == string(data) {
		t.Fatal("examples/hello/hello.yaml publishes no port 8080 to move")
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.yaml"), []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	img, err := filepath.Abs("../../examples/hello/hello.oci.tar")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(img, filepath.Join(dir, "hello.oci.tar")); err != nil {
		t.Fatal(err)
	}
	return dir, port
}

// buildLegion builds the binary the way a user runs it.
func buildLegion(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "legion")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building legion: %v\n%s", err, out)
	}
	return bin
}

// legionCmd is bin with args and a CLI settings file of its own, so the
// contexts one cluster's commands add steer no other's.
func legionCmd(t *testing.T, bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), envConfig+"="+filepath.Join(t.TempDir(), "config.yaml"))
	return cmd
}

// background runs bin with args until the test ends, its output kept.
func background(t *testing.T, bin string, args ...string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := legionCmd(t, bin, args...)
	var out syncBuffer
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.Write([]byte(sc.Text() + "\n"))
		}
	}()
	t.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				cmd.Process.Kill()
				<-done
			}
		}
		pw.Close()
		if t.Failed() {
			t.Logf("legion %s:\n%s", strings.Join(args, " "), out.String())
		}
	})
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &out
}

var rangesLine = regexp.MustCompile(`Cluster ranges: pods (\S+), services (\S+)\.`)

// rangesOf reads the ranges a cluster reported.
func rangesOf(t *testing.T, out string) [2]netip.Prefix {
	t.Helper()
	m := rangesLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no cluster ranges printed:\n%s", out)
	}
	return [2]netip.Prefix{netip.MustParsePrefix(m[1]), netip.MustParsePrefix(m[2])}
}

// Two `legion up` clusters and a three-node cluster made with daemon,
// init and join run side by side on this host with no range given: each
// gets ranges of its own, serves its example on its published port, and
// no two share an address.
func TestClustersSideBySideOnOneHost(t *testing.T) {
	t.Parallel() // every cluster here takes free ranges and ports
	bin := buildLegion(t)
	var mu sync.Mutex
	var ranges [][2]netip.Prefix
	var dns []string
	add := func(r [2]netip.Prefix) { mu.Lock(); ranges = append(ranges, r); mu.Unlock() }

	// Two single-node clusters.
	var wg sync.WaitGroup
	ups := make([]*syncBuffer, 2)
	ports := make([]int, 2)
	for i := range ups {
		dir, port := helloOnFreePort(t)
		data := filepath.Join(t.TempDir(), "data")
		t.Cleanup(func() { removeContainers(data) })
		_, out := background(t, bin, "up", dir, "--data-dir", data, "--listen", testaddr.Loopback(t))
		ups[i], ports[i] = out, port
	}
	// A three-node cluster from the CLI alone, while those start.
	helloDir, port := helloOnFreePort(t)
	addrs := make([]string, 3)
	for i := range addrs {
		data := filepath.Join(t.TempDir(), "node")
		t.Cleanup(func() { removeContainers(data) })
		if out, err := legionCmd(t, bin, "image", "load", filepath.Join(helloDir, "hello.oci.tar"), "--data-dir", data).CombinedOutput(); err != nil {
			t.Fatalf("image load: %v\n%s", err, out)
		}
		addrs[i] = testaddr.Loopback(t)
		background(t, bin, "daemon", "--data-dir", data, "--listen", addrs[i], "--run-dir", filepath.Join(t.TempDir(), "run"))
	}
	cli := func(args ...string) string {
		t.Helper()
		out, err := legionCmd(t, bin, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("legion %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	testcluster.WaitFor(t, "the daemons to listen", 30*time.Second, func() bool {
		for _, a := range addrs {
			if legionCmd(t, bin, "status", "--server", a).Run() != nil {
				return false
			}
		}
		return true
	})
	initOut := cli("init", "--server", addrs[0])
	add(rangesOf(t, initOut))
	m := regexp.MustCompile(`Admin credentials: (\S+)`).FindStringSubmatch(initOut)
	if m == nil {
		t.Fatalf("init printed no credentials:\n%s", initOut)
	}
	admin := m[1]
	token := strings.TrimSpace(cli("token", "show", "worker", "--server", addrs[0], "--credentials", admin))
	for _, a := range addrs[1:] {
		cli("join", token, "--server", addrs[0], "--daemon", a)
	}
	cli("apply", "-f", filepath.Join(helloDir, "hello.yaml"), "--server", addrs[0], "--credentials", admin)
	var published syncBuffer
	published.Write([]byte("published at http://127.0.0.1:" + strconv.Itoa(port) + "/;"))
	answersFromEveryReplica(t, &published)

	// The single-node clusters, started first, came up meanwhile.
	for i, out := range ups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			testcluster.WaitFor(t, "legion up "+strconv.Itoa(i)+" ready", 3*time.Minute, func() bool {
				return strings.Contains(out.String(), "service default/hello: 2 of 2 tasks ready")
			})
		}()
	}
	wg.Wait()
	for i, out := range ups {
		r := rangesOf(t, out.String())
		add(r)
		m := regexp.MustCompile(`DNS (\S+)\.\n`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("up %d printed no resolver address:\n%s", i, out.String())
		}
		at := netip.MustParseAddrPort(m[1])
		// The node's gateway: on the pod range itself with a namespace
		// per pod, on its image in 127/8 on the loopback network.
		if !r[0].Contains(at.Addr()) && !loopback.Image(r[0]).Contains(at.Addr()) {
			t.Errorf("up %d: resolver %s is neither in its pod range %s nor in its image %s", i, at, r[0], loopback.Image(r[0]))
		}
		dns = append(dns, m[1])
		answersFromEveryReplica(t, out)
		if !strings.Contains(out.String(), "published at http://127.0.0.1:"+strconv.Itoa(ports[i])+"/") {
			t.Errorf("up %d does not publish on its port %d:\n%s", i, ports[i], out.String())
		}
	}

	// No two clusters share a range, so none shares an address.
	for i := range ranges {
		for j := range i {
			for _, a := range ranges[i] {
				for _, b := range ranges[j] {
					if loopback.Image(a).Overlaps(loopback.Image(b)) {
						t.Errorf("clusters %d and %d share addresses: %s and %s", j, i, a, b)
					}
				}
			}
		}
	}
	if dns[0] == dns[1] {
		t.Errorf("both up clusters answer DNS at %s", dns[0])
	}
}

// Ranges the plan cannot use are refused before anything starts, naming
// the flag.
func TestRangeFlagsRefuseOtherSizes(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"init", "--pod-cidr", "10.42.0.0/24", "--server", "127.0.0.1:1"},
		{"up", "--service-cidr", "10.0.0.0/8", "--data-dir", t.TempDir()},
	} {
		_, err := runLegion(t, "", args...)
		flag := args[1]
		if err == nil || !strings.Contains(err.Error(), flag) || !strings.Contains(err.Error(), "expected an IPv4 /16") {
			t.Errorf("legion %s: %v; want a refusal naming %s", strings.Join(args, " "), err, flag)
		}
	}
}
