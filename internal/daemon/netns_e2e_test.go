package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/compose"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/sys"
)

// netnsDaemonEnv makes the test binary a legion up with pods in network
// namespaces, on the data directory it names (the kill -9 test's
// daemon): it prints "ready API ADMIN" once the node is ready and runs
// until SIGTERM, removing its pods then.
const netnsDaemonEnv = "LEGION_TEST_NETNS_DAEMON"

func init() {
	dir := os.Getenv(netnsDaemonEnv)
	if dir == "" || len(os.Args) > 1 && os.Args[1] == "process-shim" {
		return // the supervisors it starts inherit the variable
	}
	os.Unsetenv(netnsDaemonEnv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	o := netnsOptions(dir)
	// The same port on every start: the node's agent reaches its manager
	// at the address it registered.
	if listen, err := os.ReadFile(filepath.Join(dir, "listen")); err == nil {
		o.Listen = string(listen)
	}
	o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	err := Run(ctx, o, func(n *Node) error {
		fmt.Printf("ready %s %s\n", n.API, n.Admin)
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func netnsOptions(dir string) Options {
	return Options{DataDir: filepath.Join(dir, "data"), RunDir: filepath.Join(dir, "run"), Listen: "127.0.0.1:0",
		Upstreams: []string{}, RemovePods: true, PodNetwork: PodNetworkNetNS}
}

// requireNetNS skips where this host cannot make network namespaces, and
// says why.
func requireNetNS(t testing.TB) {
	t.Helper()
	if why := netnsUsable(context.Background(), sys.Exec{}, netnsNames{"t" + randHex(2)}); why != "" {
		t.Skip("pods in network namespaces: " + why)
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// startNetNSNode runs legion up in the test with a namespace per pod and
// the test image loaded. These tests run one at a time (not parallel):
// every single-node cluster takes the same pod /24, which two bridges
// of one host cannot both route.
func startNetNSNode(t testing.TB) *Node {
	t.Helper()
	requireNetNS(t)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan *Node, 1)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, netnsOptions(dir), func(n *Node) error { ready <- n; return nil }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("node: %v", err)
		}
		checkNoNetNSLeft(t, filepath.Join(dir, "data"), nil, true)
	})
	select {
	case n := <-ready:
		loadTestImage(t, n.Images)
		return n
	case err := <-done:
		done <- err // the cleanup waits for Run's end too
		t.Fatalf("the node did not start: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the node did not start in 60 s")
	}
	return nil
}

func applyText(t testing.TB, cl *client.Client, manifest string) {
	t.Helper()
	objs, err := legion.ParseManifest("t", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(context.Background(), objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readyOf lists the running, ready tasks of a service.
func readyOf(t testing.TB, cl *client.Client, ns, svc string) []*legion.Task {
	t.Helper()
	objs, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: ns, Labels: map[string]string{"legion.service": svc}})
	if err != nil {
		return nil
	}
	var out []*legion.Task
	for _, o := range objs {
		task := o.(*legion.Task)
		if task.Status.State == legion.TaskRunning && task.Status.Ready && task.Spec.DesiredState == legion.TaskRunning {
			out = append(out, task)
		}
	}
	return out
}

// inPod runs the test server with args in the task's container c, as an
// exec session would, and returns what it printed.
func inPod(ctx context.Context, rt jail.Runtime, task *legion.Task, c string, args ...string) (int, string) {
	var out bytes.Buffer
	code, err := rt.Exec(ctx, task.Metadata.UID+"-"+c, jail.ExecSpec{Command: append([]string{"server"}, args...), Stdout: &out, Stderr: &out})
	if err != nil {
		return -1, err.Error()
	}
	return code, out.String()
}

func httpBody(c *http.Client, url string) (string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// anyServer is a service of the test image serving 0.0.0.0:8080, as
// ordinary images do, with a readiness probe there.
func anyServer(name string, replicas int) string {
	return testPod("Service", name, "web", `[-listen, "0.0.0.0:8080"]`, fmt.Sprintf("replicas: %d", replicas)) +
		`        env: [{name: NAME, value: "$(HOSTNAME)"}]
` + servesHTTP("200ms") + `  endpoint:
    ports: [{name: http, port: 8080, targetPort: http}]
`
}

// The acceptance: a compose stack of three services whose images all
// listen on 0.0.0.0:8080, three replicas each, on one node. Every replica
// serves at its own address of the node's /24; each container's
// resolv.conf names the node resolver on the gateway; and from a
// container of each service, every other one answers by its name (the
// node resolver, then its VIP).
func TestNetNSComposeStackReachesEachOtherByName(t *testing.T) {
	n := startNetNSNode(t)
	var b strings.Builder
	b.WriteString("services:\n")
	svcs := []string{"alpha", "beta", "gamma"}
	for _, s := range svcs {
		fmt.Fprintf(&b, `  %s:
    image: %s
    command: [-listen, "0.0.0.0:8080"]
    environment: {NAME: %s}
    ports: [{target: 8080}]
    deploy: {replicas: 3}
`, s, testImage, s)
	}
	res, err := compose.Convert(context.Background(), []compose.File{{Name: "compose.yaml", Content: []byte(b.String())}},
		compose.Options{Stack: legion.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.Apply(context.Background(), res.Objects, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := map[string][]*legion.Task{}
	poll(t, "three ready replicas of each service", 90*time.Second, func() bool {
		for _, s := range svcs {
			if ready[s] = readyOf(t, n.Client, "default", s); len(ready[s]) != 3 {
				return false
			}
		}
		return true
	})
	// Each replica at its own address of the node's /24, all on port 8080,
	// reached from the host over the bridge.
	no, err := n.Client.Get(context.Background(), legion.KindNode, "", n.Name)
	if err != nil {
		t.Fatal(err)
	}
	subnet := netip.MustParsePrefix(no.(*legion.Node).Status.PodCIDR)
	c := &http.Client{Timeout: 2 * time.Second}
	seen := map[string]bool{}
	for _, s := range svcs {
		for _, task := range ready[s] {
			a, err := netip.ParseAddr(task.Status.IP)
			if err != nil || !subnet.Contains(a) || seen[task.Status.IP] {
				t.Fatalf("task %s has address %q, want one of the node's %s of its own", task.Metadata.Name, task.Status.IP, subnet)
			}
			seen[task.Status.IP] = true
			// The compose services have no healthcheck, so ready means
			// started, not yet listening: poll until the server answers.
			url := "http://" + net.JoinHostPort(task.Status.IP, "8080") + "/"
			var body string
			poll(t, task.Metadata.Name+" answering at "+url, 15*time.Second, func() bool {
				var err error
				body, err = httpBody(c, url)
				return err == nil
			})
			if body != s {
				t.Fatalf("%s at %s: %q, want %s", task.Metadata.Name, url, body, s)
			}
		}
	}
	// The node resolver on the gateway, bind-mounted over the image's
	// /etc/resolv.conf.
	gw := subnet.Masked().Addr().Next()
	code, conf := inPod(context.Background(), n.Runtime, ready["alpha"][0], "alpha", "-cat", "/etc/resolv.conf")
	for _, want := range []string{"nameserver " + gw.String() + "\n", "search default.legion legion\n", "options ndots:2\n"} {
		if code != 0 || !strings.Contains(conf, want) {
			t.Fatalf("the pod's resolv.conf (exit %d):\n%s\nwant a line %q", code, conf, want)
		}
	}
	for _, from := range svcs {
		for _, to := range svcs {
			if to == from {
				continue
			}
			poll(t, from+" reaching "+to+" by name", 30*time.Second, func() bool {
				code, out := inPod(context.Background(), n.Runtime, ready[from][0], from, "-get", "http://"+to+":8080/")
				return code == 0 && strings.TrimSpace(out) == to
			})
		}
	}
}

// netnsLeft lists what a node's pod network has on the host: its pods'
// namespaces, their veths' host ends, the bridge's ports, and mounts of
// its namespaces or under its data directory.
func netnsLeft(t testing.TB, dataDir string) (netns, veths, ports, mounts []string, bridge bool) {
	t.Helper()
	names := netnsNames{netnsTag(dataDir)}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		if uid, ok := strings.CutPrefix(e.Name(), names.prefix()); ok {
			netns = append(netns, uid)
		}
	}
	out, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, "lv"+names.tag) {
			veths = append(veths, name)
		}
		if name == names.bridge() {
			bridge = true
		}
		if strings.Contains(line, " master "+names.bridge()+" ") {
			ports = append(ports, name)
		}
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (strings.HasPrefix(f[4], filepath.Join(netnsDir, names.prefix())) || strings.HasPrefix(f[4], dataDir+"/")) {
			mounts = append(mounts, f[4])
		}
	}
	return
}

// checkNoNetNSLeft fails the test if the node's pod network holds more
// than the pods of keep (and, when gone, the bridge itself).
func checkNoNetNSLeft(t testing.TB, dataDir string, keep map[string]bool, gone bool) {
	t.Helper()
	netns, veths, ports, mounts, bridge := netnsLeft(t, dataDir)
	names := netnsNames{netnsTag(dataDir)}
	var extra []string
	for _, uid := range netns {
		if !keep[uid] {
			extra = append(extra, "netns "+uid)
		}
	}
	tails := map[string]bool{}
	for uid := range keep {
		tails[names.hostEnd(uid)] = true
	}
	for _, v := range veths {
		if !tails[v] {
			extra = append(extra, "veth "+v)
		}
	}
	for _, p := range ports {
		if !tails[p] {
			extra = append(extra, "bridge port "+p)
		}
	}
	if gone {
		for _, m := range mounts {
			extra = append(extra, "mount "+m)
		}
		if bridge {
			extra = append(extra, "bridge "+names.bridge())
		}
		if out, err := exec.Command("iptables", "-t", "nat", "-S", "POSTROUTING").Output(); err == nil &&
			strings.Contains(string(out)+" ", "--comment "+names.bridge()+" ") {
			extra = append(extra, "NAT rule of "+names.bridge())
		}
	}
	if len(extra) > 0 {
		t.Errorf("left behind: %s", strings.Join(extra, ", "))
	}
}

// netnsDaemon is the test binary run as a netns node (netnsDaemonEnv).
type netnsDaemon struct {
	cmd *exec.Cmd
	cl  *client.Client
}

func startNetNSDaemon(t *testing.T, dir string) *netnsDaemon {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), netnsDaemonEnv+"="+dir)
	logf, err := os.CreateTemp(dir, "daemon-*.log")
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("%s:\n%s", logf.Name(), b)
		}
	})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &netnsDaemon{cmd: cmd}
	t.Cleanup(func() { d.kill() })
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
		io.Copy(io.Discard, out)
	}()
	var f []string
	select {
	case s := <-line:
		f = strings.Fields(s)
	case <-time.After(60 * time.Second):
	}
	if len(f) != 3 || f[0] != "ready" {
		d.kill()
		t.Fatalf("the daemon said %q, want ready API ADMIN", f)
	}
	if d.cl, err = client.New(client.Options{Server: f[1], CredentialsFile: f[2]}); err != nil {
		t.Fatal(err)
	}
	return d
}

// kill ends the daemon with SIGKILL: its pods run on under their shims.
func (d *netnsDaemon) kill() {
	if d.cmd.Process == nil || d.cmd.ProcessState != nil {
		return
	}
	if d.cl != nil {
		d.cl.Close()
	}
	d.cmd.Process.Kill()
	d.cmd.Wait()
}

// stop ends it with SIGTERM, which removes its pods and their network.
func (d *netnsDaemon) stop(t *testing.T) {
	d.cl.Close()
	d.cmd.Process.Signal(syscall.SIGTERM)
	if err := d.cmd.Wait(); err != nil {
		t.Errorf("the daemon's end: %v", err)
	}
}

// netnsPods is the uids whose namespaces the node has on the host.
func netnsPods(t testing.TB, dataDir string) map[string]bool {
	netns, _, _, _, _ := netnsLeft(t, dataDir)
	out := map[string]bool{}
	for _, uid := range netns {
		out[uid] = true
	}
	return out
}

// A daemon killed with -9 while pods are being made, and again while
// they are being removed, leaves namespaces and veths that its next start
// sorts out: those of pods still there are kept and the rest removed, so
// nothing of the pod network is left once the pods are gone.
func TestNetNSNothingLeftAfterKill9(t *testing.T) {
	requireNetNS(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.WriteFile(filepath.Join(dir, "listen"), []byte(testaddr.Loopback(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	images, err := OpenImages(Options{DataDir: data, Platform: PlatformProcess}, nil)
	if err != nil {
		t.Fatal(err)
	}
	loadTestImage(t, images)
	images.Close()
	t.Cleanup(func() {
		removeAllPods(t, data)
		(&NetNSNetwork{R: sys.Exec{}, Log: quietLog(), names: netnsNames{netnsTag(data)}}).Remove(context.Background())
	})

	d := startNetNSDaemon(t, dir)
	applyText(t, d.cl, anyServer("web", 2))
	poll(t, "a first pod namespace", 60*time.Second, func() bool { return len(netnsPods(t, data)) > 0 })
	d.kill() // mid-way through the pods' start

	d = startNetNSDaemon(t, dir)
	var tasks []*legion.Task
	poll(t, "two ready replicas after the restart", 60*time.Second, func() bool {
		tasks = readyOf(t, d.cl, "default", "web")
		return len(tasks) == 2
	})
	keep := map[string]bool{}
	for _, task := range tasks {
		keep[task.Metadata.UID] = true
	}
	poll(t, "namespaces of the two running pods only", 30*time.Second, func() bool {
		got := netnsPods(t, data)
		return len(got) == 2 && got[tasks[0].Metadata.UID] && got[tasks[1].Metadata.UID]
	})
	checkNoNetNSLeft(t, data, keep, false)

	applyText(t, d.cl, anyServer("web", 0))
	poll(t, "a first pod namespace removed", 60*time.Second, func() bool { return len(netnsPods(t, data)) < 2 })
	d.kill() // mid-way through the pods' removal

	d = startNetNSDaemon(t, dir)
	// What the wait saw last, said if it times out (it failed once in CI
	// under load without saying which part was left).
	var waiting string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last seen while waiting for every pod to go: %s", waiting)
		}
	})
	poll(t, "every pod and its namespace gone", 60*time.Second, func() bool {
		objs, _, err := d.cl.List(context.Background(), legion.KindTask, client.ListOptions{Labels: map[string]string{"legion.service": "web"}})
		if err != nil {
			waiting = "listing tasks: " + err.Error()
			return false
		}
		for _, o := range objs {
			if task := o.(*legion.Task); task.Status.State == legion.TaskRunning {
				waiting = fmt.Sprintf("task %s still %s (desired %s, message %q, at %s)", task.Metadata.Name, task.Status.State,
					task.Spec.DesiredState, task.Status.Message, task.Status.Timestamp.Format(time.RFC3339Nano))
				return false
			}
		}
		netns, veths, ports, _, _ := netnsLeft(t, data)
		waiting = fmt.Sprintf("namespaces %v, veths %v, bridge ports %v", netns, veths, ports)
		return len(netns)+len(veths)+len(ports) == 0
	})
	checkNoNetNSLeft(t, data, nil, false)
	d.stop(t)
	checkNoNetNSLeft(t, data, nil, true)
}

// vipRounds is how many rounds BenchmarkNetNSVIPAgainstDirect takes, the
// VIP and the direct address in turns (the first alternating), so a
// change in the machine's load falls on both; bench/run reads the
// medians.
var vipRounds = flag.Int("vip-rounds", 1, "rounds of BenchmarkNetNSVIPAgainstDirect, the VIP and the direct address in turns")

// Requests per second to a pod in its own namespace, through its VIP
// (the proxy on the bridge) and straight to its address, in the same
// run, over one kept-alive connection each; and, where iptables is, the
// VIP through a kernel DNAT rule instead of the proxy:
//
//	go test ./internal/daemon -run '^$' -bench NetNSVIP -benchtime 3s -vip-rounds=3
func BenchmarkNetNSVIPAgainstDirect(b *testing.B) {
	n := startNetNSNode(b)
	applyText(b, n.Client, anyServer("bench", 1))
	var tasks []*legion.Task
	poll(b, "a ready replica", 60*time.Second, func() bool {
		tasks = readyOf(b, n.Client, "default", "bench")
		return len(tasks) == 1
	})
	var vip string
	poll(b, "a VIP served", 30*time.Second, func() bool {
		o, err := n.Client.Get(context.Background(), legion.KindService, "default", "bench")
		if err != nil {
			return false
		}
		vip = o.(*legion.Service).Status.VIP
		_, err = httpBody(&http.Client{Timeout: time.Second}, "http://"+net.JoinHostPort(vip, "8080")+"/")
		return vip != "" && err == nil
	})
	// Kernel DNAT for comparison, where iptables is: the same VIP sent
	// straight to the pod by a nat rule on locally made packets, which
	// then never reach the proxy.
	dnat := []string{"-t", "nat", "OUTPUT", "-d", vip, "-p", "tcp", "--dport", "8080", "-j", "DNAT", "--to-destination", net.JoinHostPort(tasks[0].Status.IP, "8080")}
	rule := func(op string) error {
		args := append([]string{dnat[0], dnat[1], op}, dnat[2:]...)
		return exec.Command("iptables", args...).Run()
	}
	type target struct{ name, addr string }
	for r := range max(*vipRounds, 1) {
		order := []target{{"direct", tasks[0].Status.IP}, {"vip", vip}}
		if r%2 == 1 {
			order[0], order[1] = order[1], order[0]
		}
		for _, tc := range append(order, target{"vip-dnat", vip}) {
			vipRound(b, tc.name, tc.addr, tasks[0].Metadata.Name, rule)
		}
	}
}

// vipRound measures requests per second to addr as sub-benchmark name;
// vip-dnat with the kernel rule in place (rule adds and removes it).
func vipRound(b *testing.B, name, addr, want string, rule func(op string) error) {
	b.Run(name, func(b *testing.B) {
		if name == "vip-dnat" {
			if err := rule("-I"); err != nil {
				b.Skipf("no kernel DNAT to compare with (iptables -t nat -I OUTPUT: %v)", err)
			}
			defer rule("-D")
		}
		c := &http.Client{Timeout: 5 * time.Second}
		url := "http://" + net.JoinHostPort(addr, "8080") + "/"
		for b.Loop() {
			if body, err := httpBody(c, url); err != nil || body != want {
				b.Fatalf("%s: %q %v", url, body, err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	})
}

// A pod given the address a pod just gone had is reached from the host at
// once: the host's neighbour entry for the address no longer names the
// gone pod's veth, which Linux keeps until it goes stale, up to a minute
// (the address is the lowest free one, so a rolling update of a service
// gives each new task its old task's address). Liveness probes failed
// and restarted the new tasks meanwhile. Without the flush this fails
// about one run in three here, when no packet of the new pod has put
// its address right first; TestNetNSNetworkJoinAndDetachCommands checks
// the flush itself every time.
func TestNetNSReusedAddressIsNotTheOldPodsNeighbour(t *testing.T) {
	n := startNetNSNode(t)
	ctx := context.Background()
	// Another pod keeps the bridge's carrier up, as on any busy node: a
	// bridge whose last port goes drops its neighbour entries.
	applyText(t, n.Client, anyServer("keep", 1))
	poll(t, "keep ready", 90*time.Second, func() bool { return len(readyOf(t, n.Client, "default", "keep")) == 1 })
	applyText(t, n.Client, anyServer("web", 1))
	var first []*legion.Task
	poll(t, "web ready", 90*time.Second, func() bool { first = readyOf(t, n.Client, "default", "web"); return len(first) == 1 })
	ip := first[0].Status.IP
	old := neighbourOf(t, ip) // the readiness probes reached it
	if old == "" {
		t.Fatalf("no neighbour entry for %s, which the host probed", ip)
	}
	// An update (stop-first): the new task starts once the old one has
	// stopped, at the address it freed.
	applyText(t, n.Client, strings.Replace(anyServer("web", 1), `value: "$(HOSTNAME)"`, `value: "second"`, 1))
	var next *legion.Task
	poll(t, "web's new task running", 60*time.Second, func() bool {
		objs, _, err := n.Client.List(ctx, legion.KindTask, client.ListOptions{Namespace: "default"})
		if err != nil {
			return false
		}
		for _, o := range objs {
			if task := o.(*legion.Task); task.Spec.Owner.Name == "web" && task.Status.State == legion.TaskRunning && task.Metadata.UID != first[0].Metadata.UID {
				next = task
				return true
			}
		}
		return false
	})
	if next.Status.IP != ip {
		t.Fatalf("the new task has %s, want the freed %s (the lowest free address)", next.Status.IP, ip)
	}
	if now := neighbourOf(t, ip); now == old {
		t.Fatalf("the host's neighbour entry for %s still names the gone pod's veth (%s)", ip, old)
	}
}

// neighbourOf is the link-layer address the host's neighbour table holds
// for ip, or "" for none.
func neighbourOf(t testing.TB, ip string) string {
	t.Helper()
	out, err := exec.Command("ip", "neigh", "show", "to", ip).Output()
	if err != nil {
		t.Fatalf("ip neigh show to %s: %v", ip, err)
	}
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "lladdr" {
			return f[i+1]
		}
	}
	return ""
}
