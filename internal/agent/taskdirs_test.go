package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/sys"
)

// sweepManager delivers one set of assignments and records the reports.
type sweepManager struct {
	as      Assignments
	mu      sync.Mutex
	reports map[string]legion.TaskStatus // by task name
}

func (m *sweepManager) Assignments(ctx context.Context) (<-chan Assignments, error) {
	ch := make(chan Assignments, 1)
	ch <- m.as
	return ch, nil
}

func (m *sweepManager) LeaderCalls() uint64 { return 0 }

func (m *sweepManager) Report(ctx context.Context, namespace, name, uid string, st legion.TaskStatus) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reports[name] = st
	return nil
}

func (m *sweepManager) ClaimVolume(ctx context.Context, ns, name, task, backend string, snapshots []string) (*legion.Volume, error) {
	return nil, fmt.Errorf("volume %s/%s: no volumes in the sweep tests", ns, name)
}

func (m *sweepManager) ReleaseVolume(ctx context.Context, ns, name string) error { return nil }

func (m *sweepManager) report(name string) (legion.TaskStatus, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.reports[name]
	return st, ok
}

type sweepNetwork struct{}

func (sweepNetwork) Attach(ctx context.Context, t *legion.Task) (string, error) {
	return "10.200.1.10", nil
}
func (sweepNetwork) Detach(ctx context.Context, t *legion.Task) error { return nil }

type noImages struct{}

var errNoImages = errors.New("no images in this test")

func (noImages) Pull(ctx context.Context, ref string, o image.PullOptions) (*image.Record, error) {
	return nil, errNoImages
}
func (noImages) PrepareRoot(ctx context.Context, id, ref, ns string, now time.Time) (string, error) {
	return "", errNoImages
}
func (noImages) RemoveRoot(ctx context.Context, id string) error { return nil }
func (noImages) Roots(ctx context.Context) ([]image.Root, error) { return nil, nil }

// writeSecret leaves a task directory as a worker makes it: a Secret file
// under secrets/.
func writeSecret(t *testing.T, runDir, uid string) string {
	t.Helper()
	p := filepath.Join(runDir, "tasks", uid, "secrets", "db-password")
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("hunter2"), 0o400); err != nil {
		t.Fatal(err)
	}
	return p
}

func sweepTask(uid string) *legion.Task {
	t := &legion.Task{}
	t.Metadata.Namespace, t.Metadata.Name, t.Metadata.UID = "default", "web."+uid, uid
	t.Spec.Node, t.Spec.DesiredState = "n1", legion.TaskRunning
	t.Spec.Pod.Containers = []legion.Container{{Name: "main", Image: "example/web:1"}}
	t.Status.State = legion.TaskRunning
	return t
}

// An agent started over the run directory of one that crashed removes the
// files of every task whose pod is gone, unmounting their tmpfs through
// umount(8), and keeps those of the pods it adopts.
func TestAgentSweepsTaskDirsAfterCrash(t *testing.T) {
	t.Parallel()
	runDir := t.TempDir()
	rt := jailtest.NewMemory()
	t.Cleanup(rt.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)

	// live: its pod runs and its task is still assigned (adopted).
	// orphan: its pod runs but no task wants it any more.
	// mounted, plain: their pods died with the agent; mounted still has
	// its tmpfs, plain never had one (or lost it).
	live := writeSecret(t, runDir, "live")
	var stale []string
	for _, uid := range []string{"orphan", "mounted", "plain"} {
		stale = append(stale, writeSecret(t, runDir, uid))
	}
	for _, uid := range []string{"live", "orphan"} {
		task := sweepTask(uid)
		if err := rt.Create(ctx, jail.ContainerSpec{ID: uid, Infra: true, Labels: labels(task, "n1", "")}); err != nil {
			t.Fatal(err)
		}
	}

	tasks := func(uid string) string { return filepath.Join(runDir, "tasks", uid) }
	f := sys.NewFake()
	// umount(8) as on FreeBSD: a directory with nothing mounted on it
	// fails its root check; a gone one fails statfs.
	f.On("umount -f "+tasks("plain"), sys.Answer{Code: 1, Stderr: "umount: " + tasks("plain") + ": not a file system root directory\n"})

	m := &sweepManager{as: Assignments{Tasks: []*legion.Task{sweepTask("live")}}, reports: map[string]legion.TaskStatus{}}
	a := &Agent{Node: "n1", Manager: m, Runtime: rt, Images: noImages{}, Network: sweepNetwork{},
		DataDir: t.TempDir(), RunDir: runDir, TaskDirs: TmpfsDirs{Runner: f}}
	actx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	wait := sync.OnceValue(func() error { stop(); return <-done })
	t.Cleanup(func() { wait() })
	go func() { done <- a.Run(actx) }()

	// The adoption is reported after the first assignments are handled.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if st, ok := m.report("web.live"); ok && st.State == legion.TaskRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the live task was not adopted")
		}
		time.Sleep(10 * time.Millisecond)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		if _, err := rt.Inspect(ctx, "orphan"); errors.Is(err, jail.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the orphan pod was not removed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := wait(); err != nil {
		t.Fatalf("agent: %v", err)
	}

	for _, p := range stale {
		if _, err := os.Stat(filepath.Dir(filepath.Dir(p))); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s outlived its task (stat of its directory: %v)", p, err)
		}
	}
	if b, err := os.ReadFile(live); err != nil || string(b) != "hunter2" {
		t.Errorf("the adopted task's secret: %q, %v", b, err)
	}
	lines := f.Lines()
	for _, uid := range []string{"orphan", "mounted", "plain"} {
		if !slices.Contains(lines, "umount -f "+tasks(uid)) {
			t.Errorf("no umount of %s's directory: %q", uid, lines)
		}
	}
	if slices.Contains(lines, "umount -f "+tasks("live")) {
		t.Errorf("the adopted task's file system was unmounted: %q", lines)
	}
}

// umount(8)'s answer for a directory with nothing mounted, or one that is
// gone, is success; any other failure is the caller's to hear.
func TestTmpfsDirsUnmount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().
		On("umount -f /run/tasks/plain", sys.Answer{Code: 1, Stderr: "umount: /run/tasks/plain: not a file system root directory\n"}).
		On("umount -f /run/tasks/gone", sys.Answer{Code: 1, Stderr: "umount: /run/tasks/gone: statfs: No such file or directory\numount: /run/tasks/gone: unknown file system\n"}).
		On("umount -f /run/tasks/busy", sys.Answer{Code: 1, Stderr: "umount: unmount of /run/tasks/busy failed: Device busy\n"})
	d := TmpfsDirs{Runner: f}
	for _, uid := range []string{"mounted", "plain", "gone"} {
		if err := d.UnmountTaskDir(ctx, "/run/tasks/"+uid); err != nil {
			t.Errorf("%s: %v", uid, err)
		}
	}
	if err := d.UnmountTaskDir(ctx, "/run/tasks/busy"); err == nil {
		t.Error("a busy file system reported as unmounted")
	}
	if err := d.MountTaskDir(ctx, "/run/tasks/new", 1<<20); err != nil {
		t.Fatal(err)
	}
	if got := f.Lines()[len(f.Lines())-1]; got != "mount -t tmpfs -o mode=0700,size=1048576 tmpfs /run/tasks/new" {
		t.Errorf("mount: %q", got)
	}
}
