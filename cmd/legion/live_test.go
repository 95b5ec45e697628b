//go:build freebsd && live

package main

// The composed jails node, live: run as root on a FreeBSD 15.1 host with
//
//	LEGION_LIVE_ZFS_ROOT=zroot/legion-live go test -tags live -run Live -v ./cmd/legion
//
// (any dataset the test may make children under; it makes one of its own
// per run and destroys it after). Each test runs the legion binary as an
// operator would: a daemon on the jails platform, init, apply, exec. The
// host needs what `legion doctor` checks (pf enabled with Legion's anchors
// called, or an empty main ruleset for --pf-main; racct; the modules).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testcluster"
	"github.com/legionbsd/legion/internal/testimage"
)

const liveImage = "localhost/legion-live/server:1"

// liveNode is one daemon on the jails platform and the cluster it made.
type liveNode struct {
	t       *testing.T
	bin     string
	data    string
	run     string // the daemon's --run-dir, kept across its restarts
	zfsRoot string
	addr    string
	admin   string
	daemon  *exec.Cmd
	out     *syncBuffer
}

// newLiveNode loads the test image, starts the daemon and makes it a
// one-node cluster. Everything it makes is undone when the test ends:
// the daemon stopped, every jail under its dataset removed, every mount
// under it and its data directory unmounted, the dataset destroyed.
func newLiveNode(t *testing.T) *liveNode {
	t.Helper()
	parent := os.Getenv("LEGION_LIVE_ZFS_ROOT")
	if os.Geteuid() != 0 || parent == "" {
		t.Skip("live: run as root with LEGION_LIVE_ZFS_ROOT naming a dataset the test may make children under")
	}
	var b [4]byte
	rand.Read(b[:])
	n := &liveNode{t: t, bin: buildLegion(t), data: filepath.Join(t.TempDir(), "data"), run: filepath.Join(t.TempDir(), "run"),
		zfsRoot: parent + "/live-" + hex.EncodeToString(b[:]), addr: testaddr.Loopback(t)}
	t.Cleanup(n.destroy)
	run(t, "zfs", "create", "-p", n.zfsRoot)

	img, err := testimage.Build(context.Background(), testimage.Options{User: "0"})
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "server.oci.tar")
	if err := testimage.WriteArchive(archive, img, liveImage); err != nil {
		t.Fatal(err)
	}
	n.legion("image", "load", archive, "--data-dir", n.data, "--platform", "jails", "--zfs-root", n.zfsRoot)
	n.start()
	out := n.legion("init", "--server", n.addr)
	m := regexp.MustCompile(`Admin credentials: (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("init printed no credentials:\n%s", out)
	}
	n.admin = m[1]
	return n
}

func (n *liveNode) start() {
	n.t.Helper()
	n.daemon, n.out = background(n.t, n.bin, "daemon", "--data-dir", n.data, "--run-dir", n.run, "--platform", "jails",
		"--zfs-root", n.zfsRoot, "--listen", n.addr, "--pf-main")
	testcluster.WaitFor(n.t, "the daemon to answer", 60*time.Second, func() bool {
		return legionCmd(n.t, n.bin, "status", "--server", n.addr).Run() == nil
	})
}

// stop ends the daemon as rc.d's stop does (SIGTERM); its pods run on.
func (n *liveNode) stop() {
	n.t.Helper()
	n.daemon.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- n.daemon.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		n.t.Fatalf("the daemon did not stop within 60 s of SIGTERM:\n%s", n.out.String())
	}
}

func (n *liveNode) legion(args ...string) string {
	n.t.Helper()
	if n.admin != "" && args[0] != "image" {
		args = append(args, "--server", n.addr, "--credentials", n.admin)
	}
	out, err := legionCmd(n.t, n.bin, args...).CombinedOutput()
	if err != nil {
		n.t.Fatalf("legion %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (n *liveNode) apply(manifest string) {
	n.t.Helper()
	f := filepath.Join(n.t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
		n.t.Fatal(err)
	}
	n.legion("apply", "-f", f)
}

// get is what the client pod reads at url, and whether it could.
func (n *liveNode) get(url string) (string, bool) {
	args := []string{"exec", "--server", n.addr, "--credentials", n.admin, "client", "--", testimage.ServerPath, "-get", url}
	out, err := legionCmd(n.t, n.bin, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

// mountpoint is where the node's dataset is mounted.
func (n *liveNode) mountpoint() string {
	return strings.TrimSpace(run(n.t, "zfs", "get", "-H", "-o", "value", "mountpoint", n.zfsRoot))
}

// reboot does to the node's pods what a reboot does: every jail of the
// node gone, every mount under its data directory and dataset that is not
// a ZFS dataset (nullfs, devfs, tmpfs: resolv.conf, secrets, volumes)
// gone; the datasets stay mounted, as `zfs mount -a` at boot leaves them.
func (n *liveNode) reboot() {
	n.t.Helper()
	mp := n.mountpoint()
	for _, line := range strings.Split(run(n.t, "jls", "-N", "name", "path"), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasPrefix(f[1], mp+"/") {
			run(n.t, "jail", "-r", f[0])
		}
	}
	for _, m := range n.mounts(false) {
		run(n.t, "umount", "-f", m)
	}
}

// mounts lists mount points under the node's data directory and dataset,
// deepest first; with zfs, its datasets too.
func (n *liveNode) mounts(zfs bool) []string {
	mp := n.mountpoint()
	var out []string
	for _, line := range strings.Split(run(n.t, "mount", "-p"), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || (f[2] == "zfs" && !zfs) {
			continue
		}
		if strings.HasPrefix(f[1], mp+"/") || strings.HasPrefix(f[1], n.data+"/") {
			out = append(out, f[1])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

func (n *liveNode) destroy() {
	if n.daemon != nil && n.daemon.ProcessState == nil {
		n.daemon.Process.Signal(syscall.SIGTERM)
		n.daemon.Wait()
	}
	if out, err := exec.Command("zfs", "get", "-H", "-o", "value", "mountpoint", n.zfsRoot).Output(); err == nil {
		mp := strings.TrimSpace(string(out))
		if jls, err := exec.Command("jls", "-N", "name", "path").Output(); err == nil {
			for _, line := range strings.Split(string(jls), "\n") {
				if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[1], mp+"/") {
					exec.Command("jail", "-r", f[0]).Run()
				}
			}
		}
		for _, m := range n.mounts(false) {
			exec.Command("umount", "-f", m).Run()
		}
		exec.Command("zfs", "destroy", "-r", "-f", n.zfsRoot).Run()
	}
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

const liveServices = `apiVersion: legion/v1
kind: Service
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 2
  pod:
    containers:
      - name: web
        image: ` + liveImage + `
        pullPolicy: never
        args: [-listen, "0.0.0.0:8080"]
        env: [{name: NAME, value: web}]
        ports: [{name: http, containerPort: 8080}]
        probes:
          readiness: {http: {path: /ready, port: http}, period: 500ms}
  endpoint:
    ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: legion/v1
kind: Service
metadata: {name: client}
spec:
  replicas: 1
  pod:
    containers:
      - name: client
        image: ` + liveImage + `
        pullPolicy: never
        args: [-listen, "0.0.0.0:8080"]
`

const livePolicy = `apiVersion: legion/v1
kind: NetworkPolicy
metadata: {name: web-from-nobody}
spec:
  services: {app: web}
  ingress: []
`

// A node set up on the jails platform runs a service whose pods another
// pod reaches by name through the VIP; a policy admitting nobody to it is
// enforced in pf and lifting it lets the client through again; the daemon
// restarted (wg0's routes and the anchors still there: defect 1) comes back
// and adopts the pods; and after a simulated reboot (jails and their
// nullfs mounts gone: defect 3) the node removes the dead pods and runs
// the service again.
func TestLiveJailsNode(t *testing.T) {
	n := newLiveNode(t)
	n.apply(liveServices)
	reaches := func(what string) {
		t.Helper()
		testcluster.WaitFor(t, what, 3*time.Minute, func() bool {
			body, ok := n.get("http://web/")
			return ok && body == "web"
		})
	}
	reaches("the client reaching web through its VIP")

	n.apply(livePolicy)
	testcluster.WaitFor(t, "the policy to keep the client out", time.Minute, func() bool {
		_, ok := n.get("http://web/")
		return !ok
	})
	n.legion("delete", "networkpolicy", "web-from-nobody")
	reaches("the client reaching web once the policy is gone")

	n.stop()
	n.start()
	reaches("web through its VIP after the daemon restarted")
	if strings.Contains(n.out.String(), "level=ERROR") {
		t.Errorf("the restarted daemon logged errors:\n%s", n.out.String())
	}

	n.stop()
	n.reboot()
	n.start()
	reaches("web through its VIP after a reboot")
	if strings.Contains(n.out.String(), "unknown file system") {
		t.Errorf("removing a pod after the reboot failed on its mounts:\n%s", n.out.String())
	}
}
