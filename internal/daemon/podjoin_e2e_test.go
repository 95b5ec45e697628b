package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/agent"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
)

// joiningNetwork is the loopback network acting as a network with pods
// to join (as VNET jails are): it records, at each call, what the runtime
// held of the task's pod.
type joiningNetwork struct {
	*LoopbackNetwork
	rt jail.Runtime

	mu     sync.Mutex
	events []string
}

func (j *joiningNetwork) note(format string, args ...any) {
	j.mu.Lock()
	j.events = append(j.events, fmt.Sprintf(format, args...))
	j.mu.Unlock()
}

func (j *joiningNetwork) seen() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.events...)
}

// pod says which of the task's containers exist and which run.
func (j *joiningNetwork) pod(ctx context.Context, t *legion.Task) string {
	cs, err := j.rt.List(ctx, map[string]string{agent.LabelTask: t.Metadata.UID})
	if err != nil {
		return "list: " + err.Error()
	}
	var out []string
	for _, c := range cs {
		kind := "container"
		if c.Infra {
			kind = "infra"
		}
		out = append(out, kind+"="+string(c.State))
	}
	return strings.Join(out, ",")
}

func (j *joiningNetwork) Join(ctx context.Context, t *legion.Task, ip string, hold bool) error {
	j.note("join %s hold=%v pod[%s]", t.Spec.Owner.Name, hold, j.pod(ctx, t))
	return nil
}

func (j *joiningNetwork) Detach(ctx context.Context, t *legion.Task) error {
	j.note("detach %s pod[%s]", t.Spec.Owner.Name, j.pod(ctx, t))
	return j.LoopbackNetwork.Detach(ctx, t)
}

func (j *joiningNetwork) Nameserver() string { return "10.200.1.1" }

// MountTaskDir and UnmountTaskDir make it the agent's TaskDirs too.
func (j *joiningNetwork) MountTaskDir(_ context.Context, dir string, size int64) error {
	j.note("mount %s %d", filepath.Base(dir), size)
	return nil
}

func (j *joiningNetwork) UnmountTaskDir(_ context.Context, dir string) error {
	_, err := os.Stat(filepath.Join(dir, agent.ResolvConfKey))
	j.note("unmount %s files-there=%v", filepath.Base(dir), err == nil)
	return nil
}

// A pod is joined once its infra container exists and before any of its
// containers is made (a VNET jail's interface moves into a jail that is
// there; nothing may run before the pod's guard is loaded), leaves the
// network before its jail goes, is joined again without waiting when
// adopted, and its containers get the pod's resolv.conf.
func TestPodJoinsBetweenItsJailAndItsContainers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the process runtime mounts files into containers only as root; run the tests as root (CI does)")
	}
	n := startNode(t)
	n.stopAgent()
	jn := &joiningNetwork{LoopbackNetwork: &LoopbackNetwork{Subnet: n.net.(*LoopbackNetwork).Subnet}, rt: n.rt}
	n.net, n.dirs = jn, jn
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n.startAgent(ctx)
	n.apply(t, testPod("Job", "dns", "cat", "[-cat, /etc/resolv.conf]"))
	saved := n.jobOutput(t, "dns", "cat")
	task := n.tasksOf(t, "legion.job", "dns")[0]
	for _, want := range []string{"search default.legion legion", "nameserver 10.200.1.1", "options ndots:2"} {
		if !strings.Contains(saved, want) {
			t.Errorf("the container's /etc/resolv.conf lacks %q: %q", want, saved)
		}
	}
	ev := jn.seen()
	// Joined with only the pod's jail there; left with the jail still
	// there (its host end goes first, 5.3).
	// The task's files are on their own file system from before the pod
	// is made until after it is gone.
	uid := task.Metadata.UID
	if len(ev) != 4 || ev[0] != fmt.Sprintf("mount %s %d", uid, 16<<20) || ev[1] != "join dns hold=true pod[infra=running]" ||
		!strings.HasPrefix(ev[2], "detach dns pod[infra=running,container=") || ev[3] != "unmount "+uid+" files-there=true" {
		t.Fatalf("network and task-directory calls %q", ev)
	}

	n.apply(t, webService)
	poll(t, "three ready tasks", 60*time.Second, func() bool { return readyTasks(n.tasksOf(t, "legion.service", "web")) == 3 })
	n.stopAgent()
	jn.mu.Lock()
	jn.events = nil
	jn.mu.Unlock()
	n.startAgent(ctx)
	poll(t, "the web pods adopted", 30*time.Second, func() bool {
		joins := 0
		for _, e := range jn.seen() {
			if e == "join web hold=false pod[infra=running,container=running]" {
				joins++
			}
		}
		return joins == 3
	})
	for _, e := range jn.seen() {
		if strings.Contains(e, "hold=true") || strings.HasPrefix(e, "detach") {
			t.Errorf("adopting must join the running pods without holding them: %q", e)
		}
	}
}

// memRuntime is the in-memory runtime as the daemon's: Wait reaps
// nothing.
type memRuntime struct{ *jailtest.Memory }

func (memRuntime) Wait() {}

// removalNode is what the removal tests run on: a directory, an
// in-memory runtime and the node's images, all gone when the test ends.
func removalNode(t *testing.T) (string, *jailtest.Memory, *image.Images) {
	t.Helper()
	dir := t.TempDir()
	mem := jailtest.NewMemory()
	t.Cleanup(mem.Close)
	images, err := OpenImages(Options{DataDir: filepath.Join(dir, "data"), Platform: PlatformProcess}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(images.Close)
	return dir, mem, images
}

// legion up's exit removes every pod of the node with its network and its
// task's file system.
func TestRemovePodsTakesNetworkAndTaskFiles(t *testing.T) {
	ctx := context.Background()
	dir, mem, images := removalNode(t)
	jn := &joiningNetwork{LoopbackNetwork: &LoopbackNetwork{}, rt: mem}
	p := &platform{kind: PlatformJails, images: images, runtime: memRuntime{mem}, network: jn, taskDirs: jn}
	const uid = "00000000-0000-4000-8000-000000000021"
	labels := map[string]string{agent.LabelNode: "n1", agent.LabelTask: uid}
	if err := mem.Create(ctx, jail.ContainerSpec{ID: uid, Infra: true, Labels: labels}); err != nil {
		t.Fatal(err)
	}
	if err := mem.Create(ctx, jail.ContainerSpec{ID: uid + "-web", Pod: uid, Labels: labels, Root: jail.Root{Path: dir}, Command: []string{"sleep", "60"}}); err != nil {
		t.Fatal(err)
	}
	other := map[string]string{agent.LabelNode: "n2", agent.LabelTask: "x"}
	if err := mem.Create(ctx, jail.ContainerSpec{ID: "00000000-0000-4000-8000-000000000099", Infra: true, Labels: other}); err != nil {
		t.Fatal(err)
	}
	if err := removePods(ctx, p, "n1", filepath.Join(dir, "run"), quietLog()); err != nil {
		t.Fatalf("removing n1's pods: %v", err)
	}
	left, _ := mem.List(ctx, nil)
	if len(left) != 1 || left[0].Labels[agent.LabelNode] != "n2" {
		t.Errorf("left %+v, want only the other node's pod", left)
	}
	ev := jn.seen()
	if len(ev) != 2 || !strings.HasPrefix(ev[0], "detach  pod[") || ev[1] != "unmount "+uid+" files-there=false" {
		t.Errorf("network and task-directory calls %q", ev)
	}
}

// stuckRuntime is the in-memory runtime whose Remove fails for one
// container, as a jail that will not die does.
type stuckRuntime struct {
	memRuntime
	stuck string
}

func (r stuckRuntime) Remove(ctx context.Context, id string) error {
	if id == r.stuck {
		return errors.New("removing the jail: Device busy")
	}
	return r.memRuntime.Remove(ctx, id)
}

// A container that could not be removed is named in removePods' error,
// which legion up reports instead of saying no pod is left.
func TestRemovePodsSaysWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	dir, mem, images := removalNode(t)
	const stuck = "00000000-0000-4000-8000-000000000031"
	p := &platform{kind: PlatformProcess, images: images, runtime: stuckRuntime{memRuntime{mem}, stuck}}
	for _, id := range []string{"00000000-0000-4000-8000-000000000030", stuck} {
		labels := map[string]string{agent.LabelNode: "n1", agent.LabelTask: id}
		if err := mem.Create(ctx, jail.ContainerSpec{ID: id, Labels: labels, Root: jail.Root{Path: dir}, Command: []string{"sleep", "60"}}); err != nil {
			t.Fatal(err)
		}
	}
	err := removePods(ctx, p, "n1", filepath.Join(dir, "run"), quietLog())
	if err == nil || !strings.Contains(err.Error(), "still there") || !strings.HasSuffix(err.Error(), ": "+stuck) {
		t.Fatalf("removing n1's pods with one stuck: %v; want an error naming %s alone", err, stuck)
	}
	if left, _ := mem.List(ctx, nil); len(left) != 1 || left[0].ID != stuck {
		t.Errorf("left %+v, want %s alone", left, stuck)
	}
}
