package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/daemon"
	"google.golang.org/grpc/codes"
)

// Port is the gRPC port every lab node listens on, inside its own
// namespace, so one fixed port cannot clash.
const Port = 7470

// startTimeout bounds a daemon coming up, an init or a join.
const startTimeout = 60 * time.Second

// stopTimeout is how long a stopped daemon gets before it is killed.
const stopTimeout = 20 * time.Second

// Logger receives the lab's progress; testing.TB satisfies it.
type Logger interface {
	Logf(format string, args ...any)
}

// Options describe a lab.
type Options struct {
	// Name tags the lab's namespaces, bridge and links (lab-NAME-m1,
	// lbNAME); up to 8 lower-case letters and digits, random when empty.
	Name     string
	Managers int // at least 1; the first runs init
	Workers  int
	// Binary is the legion binary; empty builds it once per process
	// (Build).
	Binary string
	// Dir holds the nodes' data directories and logs; empty makes a
	// temporary one that Close removes.
	Dir string
	// Images are image archives loaded into every node before it starts.
	Images []string
	// JoinVia names the manager (m1, m2, ...) the other nodes join
	// through, which a worker's agent then follows first; empty means m1.
	JoinVia string
	// RaftTiming is the daemons' --raft-timing; empty means fast.
	RaftTiming string
	// ClientRetry is the Retry of the clients Client makes (zero: 5 s).
	ClientRetry time.Duration
	Log         Logger
}

// Node is one daemon in its own network namespace.
type Node struct {
	Name    string // m1, m2, ... managers; w1, w2, ... workers
	Manager bool
	ID      string     // the node id the daemon chose
	Addr    netip.Addr // its address on the lab network
	NS      string     // its network namespace
	Veth    string     // the host end of its link, on the lab bridge
	DataDir string
	// RunDir is where its daemon keeps tasks' secrets and the resolver's
	// zone: in the lab's directory, so it goes with the lab, where the
	// daemon's default (one per data directory under /dev/shm) would stay.
	RunDir  string
	LogFile string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Endpoint is the node's gRPC address on the lab network.
func (n *Node) Endpoint() string { return netip.AddrPortFrom(n.Addr, Port).String() }

// Lab is a set of Legion daemons, each in its own network namespace,
// reaching each other only through one bridge of their own.
type Lab struct {
	opts   Options
	id     string
	prefix netip.Prefix
	Bridge string
	Dir    string
	bin    string
	Nodes  []*Node

	mu       sync.Mutex
	cleanups []func() // undone in reverse by Close
	clients  []*client.Client
	closed   bool
}

// Available says why a lab cannot run here, or nil: it needs root and
// the ip command, and a network namespace must be creatable.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("the ip command (iproute2) is not installed")
	}
	probe := "lab-probe-" + randomHex(4)
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		return fmt.Errorf("cannot make a network namespace: %v: %s", err, strings.TrimSpace(string(out)))
	}
	exec.Command("ip", "netns", "del", probe).Run()
	return nil
}

// New starts a lab for a test, skipping the test when namespaces cannot
// be made here and saying why; Close is registered before anything is
// made, so a failure half-way leaves nothing behind.
func New(t testing.TB, opts Options) *Lab {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no lab: %v", err)
	}
	if opts.Log == nil {
		opts.Log = t
	}
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	l := newLab(opts)
	t.Cleanup(func() {
		if t.Failed() {
			l.dumpLogs()
		}
		l.Close()
	})
	if err := l.start(); err != nil {
		t.Fatalf("lab: %v", err)
	}
	return l
}

// Open starts a lab outside tests; on an error it has removed whatever
// it made. The caller must Close it.
func Open(opts Options) (*Lab, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = discard{}
	}
	var tmp string
	if opts.Dir == "" {
		dir, err := os.MkdirTemp("", "legion-lab-")
		if err != nil {
			return nil, err
		}
		opts.Dir, tmp = dir, dir
	}
	l := newLab(opts)
	if tmp != "" {
		l.addCleanup(func() { os.RemoveAll(tmp) })
	}
	if err := l.start(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

type discard struct{}

func (discard) Logf(string, ...any) {}

func newLab(opts Options) *Lab {
	if opts.Managers < 1 {
		opts.Managers = 1
	}
	if opts.RaftTiming == "" {
		opts.RaftTiming = "fast"
	}
	if opts.ClientRetry == 0 {
		opts.ClientRetry = 5 * time.Second
	}
	id := opts.Name
	if id == "" {
		id = randomHex(3)
	}
	return &Lab{opts: opts, id: id, Bridge: "lb" + id, Dir: opts.Dir}
}

func validName(s string) bool {
	if len(s) == 0 || len(s) > 8 {
		return false
	}
	for _, r := range s {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return false
		}
	}
	return true
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (l *Lab) addCleanup(f func()) {
	l.mu.Lock()
	l.cleanups = append(l.cleanups, f)
	l.mu.Unlock()
}

func (l *Lab) logf(format string, args ...any) {
	l.opts.Log.Logf("lab %s: "+format, append([]any{l.id}, args...)...)
}

// start builds the network, then starts, initialises and joins the nodes.
func (l *Lab) start() error {
	if !validName(l.id) {
		return fmt.Errorf("lab name %q: want 1 to 8 lower-case letters and digits (interface names are at most 15 bytes)", l.id)
	}
	bin := l.opts.Binary
	if bin == "" {
		var err error
		if bin, err = Build(); err != nil {
			return err
		}
	}
	l.bin = bin
	prefix, err := pickPrefix()
	if err != nil {
		return err
	}
	l.prefix = prefix
	if err := l.makeBridge(); err != nil {
		return err
	}
	for i := range l.opts.Managers + l.opts.Workers {
		n := &Node{Manager: i < l.opts.Managers}
		if n.Manager {
			n.Name = fmt.Sprintf("m%d", i+1)
		} else {
			n.Name = fmt.Sprintf("w%d", i-l.opts.Managers+1)
		}
		if err := l.addNode(n, i); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, n := range l.Nodes {
		if err := l.run(n); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, n := range l.Nodes {
		if err := l.waitAnswering(n); err != nil {
			return err
		}
	}
	return l.form()
}

// Prefix is the lab network's range.
func (l *Lab) Prefix() netip.Prefix { return l.prefix }

// Admin is the path of the cluster's admin credentials.
func (l *Lab) Admin() string { return filepath.Join(l.Nodes[0].DataDir, "admin.pem") }

// Binary is the legion binary the nodes run.
func (l *Lab) Binary() string { return l.bin }

// Node is the node named name (m1, w2, ...), or nil.
func (l *Lab) Node(name string) *Node {
	for _, n := range l.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Managers and Workers are the lab's nodes of each role.
func (l *Lab) Managers() []*Node { return l.filter(true) }
func (l *Lab) Workers() []*Node  { return l.filter(false) }

func (l *Lab) filter(manager bool) []*Node {
	var out []*Node
	for _, n := range l.Nodes {
		if n.Manager == manager {
			out = append(out, n)
		}
	}
	return out
}

// run starts n's daemon in its namespace, its output to its log file.
func (l *Lab) run(n *Node) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		return fmt.Errorf("already running (pid %d)", n.cmd.Process.Pid)
	}
	logf, err := os.OpenFile(n.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	// ip netns exec replaces itself with the daemon, so the pid is the
	// daemon's.
	cmd := exec.Command("ip", "netns", "exec", n.NS, l.bin, "daemon", "--data-dir", n.DataDir, "--run-dir", n.RunDir,
		"--listen", fmt.Sprintf("0.0.0.0:%d", Port), "--advertise", n.Endpoint(), "--raft-timing", l.opts.RaftTiming)
	cmd.Env = l.cliEnv()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	n.cmd, n.done = cmd, done
	return nil
}

// signal sends sig to n's daemon and waits for it to end (killing it
// after stopTimeout).
func (l *Lab) signal(n *Node, sig syscall.Signal) error {
	n.mu.Lock()
	cmd, done := n.cmd, n.done
	n.cmd = nil
	n.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("node %s is not running", n.Name)
	}
	cmd.Process.Signal(sig)
	select {
	case <-done:
		return nil
	case <-time.After(stopTimeout):
		cmd.Process.Kill()
		<-done
		return fmt.Errorf("node %s did not stop on %v within %v: killed", n.Name, sig, stopTimeout)
	}
}

// Stop ends n's daemon with SIGTERM; its pods keep running, as a daemon
// stop leaves them.
func (l *Lab) Stop(n *Node) error { return l.signal(n, syscall.SIGTERM) }

// Kill ends n's daemon with SIGKILL.
func (l *Lab) Kill(n *Node) error { return l.signal(n, syscall.SIGKILL) }

// Restart starts a stopped or killed node's daemon again and waits for
// it to answer.
func (l *Lab) Restart(n *Node) error {
	if err := l.run(n); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return l.waitAnswering(n)
}

// Running says whether n's daemon runs.
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return false
	}
	select {
	case <-n.done:
		return false
	default:
		return true
	}
}

// waitAnswering waits until n's daemon answers a status call.
func (l *Lab) waitAnswering(n *Node) error {
	c, err := client.New(client.Options{Server: n.Endpoint(), Retry: -1})
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := c.Status(ctx)
		cancel()
		// A fresh daemon refuses a status call from off its host: that
		// is an answer too.
		if code := client.Code(err); err == nil || code != codes.Unavailable && code != codes.DeadlineExceeded {
			return nil
		}
		if !n.Running() {
			return fmt.Errorf("node %s: the daemon ended: %s", n.Name, tail(n.LogFile, 20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s did not answer at %s within %v: %v", n.Name, n.Endpoint(), startTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// legion runs the legion binary in n's namespace, as a user on that
// node would.
func (l *Lab) legion(n *Node, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.NS, l.bin}, args...)...)
	cmd.Env = l.cliEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("legion %s on %s: %v: %s", strings.Join(args, " "), n.Name, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// cliEnv is the environment of the legion commands the lab runs: none of
// the user's settings, and the contexts init saves kept in the lab's
// directory, not the user's.
func (l *Lab) cliEnv() []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "LEGION_") && !strings.HasPrefix(e, "HOME=") && !strings.HasPrefix(e, "XDG_CONFIG_HOME=") {
			env = append(env, e)
		}
	}
	cfg := filepath.Join(l.Dir, "cli")
	return append(env, "HOME="+cfg, "XDG_CONFIG_HOME="+cfg, "LEGION_CONFIG="+filepath.Join(cfg, "config.yaml"))
}

// form runs init on the first manager and joins the others through it.
func (l *Lab) form() error {
	first := l.Nodes[0]
	local := fmt.Sprintf("127.0.0.1:%d", Port)
	for _, n := range l.Nodes {
		// A fresh daemon says its id to a status call from its own host.
		out, err := l.legion(n, "status", "--server", local)
		if err != nil {
			return err
		}
		if f := strings.Fields(out); len(f) > 1 && (f[0] == "Node:" || f[0] == "Node") {
			n.ID = f[1]
		} else {
			return fmt.Errorf("node %s: no node id in legion status: %s", n.Name, out)
		}
	}
	if _, err := l.legion(first, "init", "--server", local); err != nil {
		return err
	}
	tokens := map[bool]string{}
	for _, role := range []string{"manager", "worker"} {
		out, err := l.legion(first, "token", "show", role, "--server", local, "--credentials", l.Admin())
		if err != nil {
			return err
		}
		tokens[role == "manager"] = lastField(out)
	}
	via := first
	if l.opts.JoinVia != "" {
		if via = l.Node(l.opts.JoinVia); via == nil || !via.Manager {
			return fmt.Errorf("JoinVia %q: no such manager", l.opts.JoinVia)
		}
	}
	for _, n := range l.Nodes[1:] {
		server := via.Endpoint()
		if indexOf(l.Nodes, n) <= indexOf(l.Nodes, via) {
			server = first.Endpoint() // via itself, and managers before it, join through m1
		}
		if _, err := l.legion(n, "join", tokens[n.Manager], "--server", server, "--daemon", local); err != nil {
			return err
		}
	}
	return l.WaitFormed(startTimeout)
}

func indexOf(nodes []*Node, n *Node) int {
	for i, o := range nodes {
		if o == n {
			return i
		}
	}
	return -1
}

// lastField is the last word of s: token show prints the token last.
func lastField(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return ""
	}
	return f[len(f)-1]
}

// Client is a client of n's daemon with the cluster's admin
// credentials; Close closes it.
func (l *Lab) Client(n *Node) *client.Client {
	c, err := client.New(client.Options{Server: n.Endpoint(), CredentialsFile: l.Admin(), Retry: l.opts.ClientRetry})
	if err != nil {
		panic(fmt.Sprintf("lab: client of %s: %v", n.Name, err)) // only a missing admin.pem gets here
	}
	l.mu.Lock()
	l.clients = append(l.clients, c)
	l.mu.Unlock()
	return c
}

// Close stops every daemon, removes their pods, the namespaces, links and
// the bridge, in the reverse order they were made. It may be called more
// than once.
func (l *Lab) Close() {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	clients, cleanups := l.clients, l.cleanups
	l.mu.Unlock()
	for _, c := range clients {
		c.Close()
	}
	var wg sync.WaitGroup
	for _, n := range l.Nodes {
		if n.Running() {
			wg.Go(func() { l.Kill(n) })
		}
	}
	wg.Wait()
	for _, n := range l.Nodes {
		removePods(n.DataDir, l.bin)
		killNamespace(n.NS)
		// Pod namespaces are files under /run/netns, which every
		// namespace shares: they outlive the node's own.
		daemon.RemovePodNetwork(context.Background(), n.DataDir)
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

// removePods removes the containers a node's daemon left (a stopped
// daemon leaves its pods running) and their roots.
func removePods(dataDir, shim string) {
	daemon.RemoveLeftContainers(context.Background(), dataDir, shim)
}

// killNamespace kills whatever still runs in a node's namespace, such as
// the node resolver a daemon starts, which outlives a SIGKILL of the
// daemon for a moment; it waits until they are gone.
func killNamespace(ns string) {
	deadline := time.Now().Add(stopTimeout)
	for time.Now().Before(deadline) {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		pids := strings.Fields(string(out))
		if err != nil || len(pids) == 0 {
			return
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(pollEvery) // the kernel reaps them; the loop looks again
	}
}

// dumpLogs logs the end of each node's log, for a failed test.
func (l *Lab) dumpLogs() {
	for _, n := range l.Nodes {
		l.logf("%s (%s, %s) log tail:\n%s", n.Name, n.ID, n.Addr, tail(n.LogFile, 40))
	}
}

func tail(path string, lines int) string {
	b, _ := os.ReadFile(path)
	ls := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}
