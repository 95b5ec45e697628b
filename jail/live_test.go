//go:build freebsd && live

package jail_test

// Live tests on a FreeBSD 15 host, run as root with `go test -tags live`:
//
//	LEGION_LIVE_ROOT        a FreeBSD userland (an unpacked base or the
//	                        freebsd-runtime image) the containers run on
//	LEGION_LIVE_LINUX_ROOT  an unpacked Linux image (alpine:3.20) for the
//	                        Linux test
//
// kern.racct.enable=1 must be set at boot for the limits test.

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/sys"
)

func liveRoot(t *testing.T, env string) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("live jail tests need root")
	}
	root := os.Getenv(env)
	if root == "" {
		t.Skipf("%s is not set", env)
	}
	return root
}

func liveRuntime(t *testing.T) *jail.Jails {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := jail.LoadModules(ctx, sys.Exec{}, jail.NodeModules); err != nil {
		t.Fatal(err)
	}
	j, err := jail.NewJails(jail.Config{DataDir: t.TempDir(), Runner: sys.Exec{}, Shim: exe, Spawner: jail.ExecSpawner{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Wait)
	return j
}

func TestLiveConformance(t *testing.T) {
	root := liveRoot(t, "LEGION_LIVE_ROOT")
	jailtest.RunConformance(t, func(t *testing.T) jail.Runtime { return liveRuntime(t) },
		jailtest.WithRoot(func(t *testing.T, id string) jail.Root { return jail.Root{Path: root} }))
}

func waitExited(t *testing.T, r jail.Runtime, id string, d time.Duration) jail.ContainerStatus {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		st, err := r.Inspect(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.State == jail.StateExited {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s did not exit within %v", id, d)
	return jail.ContainerStatus{}
}

func logText(t *testing.T, r jail.Runtime, id string) string {
	t.Helper()
	rc, err := r.Logs(context.Background(), id, jail.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	data, _ := io.ReadAll(rc)
	return string(data)
}

func readBack(t *testing.T, name string, params ...string) map[string]string {
	t.Helper()
	res, err := sys.Run(context.Background(), sys.Exec{}, "jls", append([]string{"--libxo=json", "-j", name}, params...)...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := jail.ParseJLS(res.Stdout)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A pod: two containers talk over the pod's 127.0.0.1 and each jail has
// the security defaults; the pod jail has its own VNET.
func TestLivePod(t *testing.T) {
	root := liveRoot(t, "LEGION_LIVE_ROOT")
	j := liveRuntime(t)
	ctx := context.Background()
	if err := j.Create(ctx, jail.ContainerSpec{ID: "livepod", Infra: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Remove(context.Background(), "livepod") })
	if _, err := sys.Run(ctx, sys.Exec{}, "ifconfig", "-j", "livepod", "lo0", "inet", "127.0.0.1/8", "up"); err != nil {
		t.Fatal(err)
	}
	volume := t.TempDir()
	os.WriteFile(volume+"/greeting", []byte("hello from the volume\n"), 0o644)
	server := jail.ContainerSpec{ID: "server", Pod: "livepod", Root: jail.Root{Path: root},
		Command: []string{"/bin/sh", "-c", "cat /data/greeting | nc -N -l 127.0.0.1 8080"},
		Mounts:  []jail.Mount{{Kind: jail.MountNullfs, Source: volume, Target: "/data", ReadOnly: true}}}
	client := jail.ContainerSpec{ID: "client", Pod: "livepod", Root: jail.Root{Path: root},
		Command: []string{"/bin/sh", "-c", "sleep 1; nc -N 127.0.0.1 8080 </dev/null"}}
	for _, s := range []jail.ContainerSpec{server, client} {
		if err := j.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := j.Start(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	got := readBack(t, "livepod.server", "allow.raw_sockets", "allow.mount", "enforce_statfs", "securelevel", "sysvshm")
	for k, want := range map[string]string{"allow.raw_sockets": "false", "allow.mount": "false", "enforce_statfs": "2", "securelevel": "2", "sysvshm": "disable"} {
		if got[k] != want && !(want == "false" && got[k] == "0") {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if v := readBack(t, "livepod", "vnet")["vnet"]; v != "new" {
		t.Fatalf("pod jail vnet = %q, want new", v)
	}
	if st := waitExited(t, j, "client", 30*time.Second); st.ExitCode != 0 {
		t.Fatalf("client: %+v\n%s", st, logText(t, j, "client"))
	}
	if out := logText(t, j, "client"); !strings.Contains(out, "hello from the volume") {
		t.Fatalf("client output %q: want the server's greeting over the pod's loopback", out)
	}
}

// The 6.3 measurements: cpu 500m gives a busy loop about half a CPU, and
// maxproc 20 lets 19 processes run beside the main one, refusing the next.
func TestLiveLimits(t *testing.T) {
	root := liveRoot(t, "LEGION_LIVE_ROOT")
	ctx := context.Background()
	p, err := jail.DetectPlatform(ctx, sys.Exec{})
	if err != nil {
		t.Fatal(err)
	}
	if p.NoLimits {
		t.Skip("kern.racct.enable is not 1")
	}
	j := liveRuntime(t)
	if err := j.Create(ctx, jail.ContainerSpec{ID: "limits", Infra: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Remove(context.Background(), "limits") })

	busy := jail.ContainerSpec{ID: "busy", Pod: "limits", Root: jail.Root{Path: root},
		Command:   []string{"/bin/sh", "-c", "while :; do :; done"},
		Resources: jail.Resources{CPUMillis: 500}}
	if err := j.Create(ctx, busy); err != nil {
		t.Fatal(err)
	}
	if err := j.Start(ctx, "busy"); err != nil {
		t.Fatal(err)
	}
	const window = 20 * time.Second
	time.Sleep(window) // measuring a rate over wall time: the window is the measurement
	u, err := j.Usage(ctx, "busy")
	if err != nil {
		t.Fatal(err)
	}
	share := u.CPUTime.Seconds() / window.Seconds()
	t.Logf("cpu 500m: %.2f of a CPU over %v", share, window)
	if share < 0.3 || share > 0.7 {
		t.Errorf("cpu 500m gave %.2f of a CPU, want about 0.5", share)
	}
	j.Stop(ctx, "busy", time.Second)

	forks := jail.ContainerSpec{ID: "forks", Pod: "limits", Root: jail.Root{Path: root},
		Command:   []string{"/bin/sh", "-c", "i=0; while [ $i -lt 30 ]; do sleep 120 & i=$((i+1)); done; echo forked; wait"},
		Resources: jail.Resources{MaxProc: 20}}
	if err := j.Create(ctx, forks); err != nil {
		t.Fatal(err)
	}
	if err := j.Start(ctx, "forks"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logText(t, j, "forks"), "forked") {
		if time.Now().After(deadline) {
			t.Fatalf("the loop never finished: %s", logText(t, j, "forks"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	u, err = j.Usage(ctx, "forks")
	if err != nil {
		t.Fatal(err)
	}
	if u.Processes != 20 {
		t.Errorf("maxproc 20: %d processes, want 20 (the main one and 19 children)", u.Processes)
	}
	if out := logText(t, j, "forks"); !strings.Contains(out, "fork") {
		t.Errorf("the refused forks said nothing: %s", out)
	}
	if st, _ := j.Inspect(ctx, "forks"); st.State != jail.StateRunning {
		t.Errorf("the main process must run on: %+v", st)
	}
}

// A Linux image runs through the Linux ABI with its /proc, /sys, /dev/fd
// and /dev/shm.
func TestLiveLinux(t *testing.T) {
	root := liveRoot(t, "LEGION_LIVE_LINUX_ROOT")
	ctx := context.Background()
	warnings, err := jail.EnableLinux(ctx, sys.Exec{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range warnings {
		t.Log(w)
	}
	j := liveRuntime(t)
	if err := j.Create(ctx, jail.ContainerSpec{ID: "linuxpod", Infra: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Remove(context.Background(), "linuxpod") })
	spec := jail.ContainerSpec{ID: "alpine", Pod: "linuxpod", Linux: true, Root: jail.Root{Path: root}, User: "nobody",
		Command: []string{"/bin/sh", "-c", "uname -s; id -u; test -r /proc/self/status && echo proc; test -d /sys/kernel && echo sys; ls /dev/fd/0 >/dev/null && echo fd; echo x > /dev/shm/t && echo shm"}}
	if err := j.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := j.Start(ctx, "alpine"); err != nil {
		t.Fatal(err)
	}
	st := waitExited(t, j, "alpine", 30*time.Second)
	out := logText(t, j, "alpine")
	for _, want := range []string{"Linux", "65534", "proc", "sys", "fd", "shm"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q: %s", want, out)
		}
	}
	if st.ExitCode != 0 {
		t.Errorf("exit %d: %s", st.ExitCode, fmt.Sprint(out))
	}
}

// The per-page count reads the kernel's maps: for a shell and its forked
// children it is above zero and no more than rctl's per-process sum.
func TestLiveMemoryCount(t *testing.T) {
	root := liveRoot(t, "LEGION_LIVE_ROOT")
	ctx := context.Background()
	j := liveRuntime(t)
	if err := j.Create(ctx, jail.ContainerSpec{ID: "mempod", Infra: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Remove(context.Background(), "mempod") })
	spec := jail.ContainerSpec{ID: "forks", Pod: "mempod", Root: jail.Root{Path: root},
		Command: []string{"/bin/sh", "-c", "for i in 1 2 3 4; do sleep 120 & done; echo ready; wait"}}
	if err := j.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := j.Start(ctx, "forks"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logText(t, j, "forks"), "ready") {
		if time.Now().After(deadline) {
			t.Fatal("never ready")
		}
		time.Sleep(100 * time.Millisecond)
	}
	vm, _ := jail.HostVM(sys.Exec{})
	c, err := jail.VMCounter{Source: vm}.Count(ctx, "mempod.forks")
	if err != nil {
		t.Fatal(err)
	}
	u, err := jail.RctlUsage(ctx, sys.Exec{}, "mempod.forks")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("counted %d bytes over %d processes; rctl memoryuse %d", c.Bytes, len(c.Own), u.MemoryBytes)
	if c.Bytes <= 0 || len(c.Own) != 5 {
		t.Fatalf("count %+v: want memory for the shell and its four children", c)
	}
	if u.MemoryBytes > 0 && c.Bytes > u.MemoryBytes {
		t.Fatalf("count %d above rctl's per-process sum %d", c.Bytes, u.MemoryBytes)
	}
}

// After a reboot (simulated: everything of the container unmounted by
// hand, as a reboot leaves it) Remove must still go through (defect 3 of
// issue 22). It also shows what umount(8) says of a file mounted over a
// file that is no longer mounted, which sys.UmountNotMounted records.
func TestLiveRemoveAfterSimulatedReboot(t *testing.T) {
	root := liveRoot(t, "LEGION_LIVE_ROOT")
	j := liveRuntime(t)
	ctx := context.Background()
	if err := j.Create(ctx, jail.ContainerSpec{ID: "rebootpod", Infra: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Remove(context.Background(), "rebootpod") })
	secret := t.TempDir() + "/token"
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := jail.ContainerSpec{ID: "rebooted", Pod: "rebootpod", Root: jail.Root{Path: root},
		Command: []string{"/bin/sh", "-c", "exec sleep 1000"},
		Mounts:  []jail.Mount{{Kind: jail.MountNullfs, Source: secret, Target: "/run/secrets/token", ReadOnly: true}}}
	if err := j.Create(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if err := j.Start(ctx, spec.ID); err != nil {
		t.Fatal(err)
	}
	// What a reboot leaves: no jail, nothing mounted.
	if _, err := sys.Run(ctx, sys.Exec{}, "jail", "-R", "rebootpod.rebooted"); err != nil {
		t.Fatal(err)
	}
	target := root + "/run/secrets/token"
	for _, p := range []string{target, root + "/dev"} {
		if _, err := sys.Run(ctx, sys.Exec{}, "umount", "-f", p); err != nil {
			t.Fatalf("unmount %s: %v", p, err)
		}
	}
	_, err := sys.Run(ctx, sys.Exec{}, "umount", "-f", target)
	if !sys.IsExit(err, "unknown file system") {
		t.Errorf("umount of a file no longer mounted: got %v, recorded \"unknown file system\" on standard error (sys.UmountNotMounted)", err)
	}
	if err := j.Remove(ctx, spec.ID); err != nil {
		t.Fatalf("remove after a reboot: %v", err)
	}
}
