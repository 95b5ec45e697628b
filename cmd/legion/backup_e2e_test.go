package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/netplan"
	"github.com/legionbsd/legion/internal/daemon"
	"github.com/legionbsd/legion/internal/testcluster"
)

// workerAgent runs an agent beside a test cluster's worker, as legion
// daemon does, with the hello example's image loaded; stop and start
// take the node away and bring it back.
type workerAgent struct {
	t      *testing.T
	w      *testcluster.Manager
	o      daemon.Options
	cancel context.CancelFunc
	done   chan error
}

func startWorker(t *testing.T, w *testcluster.Manager) *workerAgent {
	t.Helper()
	a := &workerAgent{t: t, w: w, o: daemon.Options{DataDir: w.Dir, RunDir: filepath.Join(t.TempDir(), "run"),
		DNSListen: "127.0.0.1:0", Upstreams: []string{}}}
	images, err := daemon.OpenImages(daemon.Options{DataDir: w.Dir, Platform: daemon.PlatformProcess}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open("../../examples/hello/hello.oci.tar")
	if err != nil {
		t.Fatal(err)
	}
	_, err = images.Load(context.Background(), f, "localhost/hello:1", time.Now())
	f.Close()
	images.Close()
	if err != nil {
		t.Fatalf("loading the example's image: %v", err)
	}
	t.Cleanup(func() {
		a.stop()
		removeContainers(w.Dir)
	})
	a.start()
	return a
}

func (a *workerAgent) start() {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan error, 1)
	srv, o := a.w.Server, a.o
	go func() { a.done <- daemon.RunAgent(ctx, srv, o, nil) }()
}

func (a *workerAgent) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	if err := <-a.done; err != nil {
		a.t.Errorf("agent: %v", err)
	}
	a.cancel = nil
}

func getObject(t *testing.T, cl *client.Client, kind legion.Kind, ns, name string) (legion.Object, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return cl.Get(ctx, kind, ns, name)
}

func applyObjects(t *testing.T, cl *client.Client, manifest string) []client.Result {
	t.Helper()
	objs, err := legion.ParseManifest("t.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	res, err := cl.Apply(context.Background(), objs, client.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

const configManifest = `apiVersion: legion/v1
kind: Config
metadata: {name: NAME}
spec: {text: hello}
`

// legion backup, then everything stopped, two managers' disks lost, and
// legion restore on the third: it leads alone, the others join again
// from empty directories with the backed-up token, the worker's task is
// adopted rather than started again, what was made after the backup is
// gone, what was there before keeps its version, and writes carry on
// above the backup's version.
func TestBackupThenRestoreOnOneManagerAfterLosingTwo(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3, Leader: true, Workers: 1})
	cl := c.Client()
	agent := startWorker(t, c.Workers[0])
	before := applyObjects(t, cl, strings.ReplaceAll(configManifest, "NAME", "before"))[0].Object
	applyObjects(t, cl, helloApp("web", readyHTTP))
	var task *legion.Task
	waitFor(t, "the service's task ready", func() bool {
		ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		for _, o := range ts {
			if tk := o.(*legion.Task); tk.Spec.Owner.Name == "web" && tk.Status.Ready {
				task = tk
				return true
			}
		}
		return false
	})
	plan, err := netplan.Read(c.Managers[0].Store())
	if err != nil {
		t.Fatal(err)
	}
	token := c.Token("manager")
	file := filepath.Join(t.TempDir(), "cluster.backup")
	m0 := c.Managers[0]
	flags := []string{"--server", m0.Addr, "--credentials", c.AdminFile()}
	out, err := runLegion(t, "", append([]string{"backup", "-o", file}, flags...)...)
	if err != nil {
		t.Fatalf("legion backup: %v\n%s", err, out)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the backup file: %v %v, want mode 0600", fi, err)
	}
	applyObjects(t, cl, strings.ReplaceAll(configManifest, "NAME", "after"))

	// Everything stops; two managers lose their disks.
	agent.stop()
	running := containers(t, c.Workers[0].Dir)
	if len(running) == 0 {
		t.Fatal("no container of the worker runs once its agent stopped: nothing to adopt")
	}
	c.Workers[0].Stop()
	for _, m := range c.Managers {
		m.Stop()
	}
	for _, m := range c.Managers[1:] {
		if err := os.RemoveAll(m.Dir); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := runLegion(t, "", "restore", file); err == nil {
		t.Fatalf("restore without --data-dir succeeded: %s", out)
	}
	out, err = runLegion(t, "", "restore", file, "--data-dir", m0.Dir)
	if err != nil || !strings.Contains(out, "restored from "+file) {
		t.Fatalf("legion restore: %v\n%s", err, out)
	}
	m0.Restart()
	testcluster.WaitFor(t, "the restored manager to lead alone", 20*time.Second, func() bool {
		st := m0.Store()
		return st != nil && st.IsLeader()
	})
	// The cluster's ranges come back with it: every address is in them.
	if got, err := netplan.Read(m0.Store()); err != nil || got != plan {
		t.Errorf("the restored cluster's ranges: %v %v, want %v", got, err, plan)
	}
	got, err := getObject(t, cl, legion.KindConfig, legion.DefaultNamespace, "before")
	if err != nil || got.GetMetadata().Version != before.GetMetadata().Version {
		t.Fatalf("Config before after the restore: %+v %v, want version %d", got, err, before.GetMetadata().Version)
	}
	if _, err := getObject(t, cl, legion.KindConfig, legion.DefaultNamespace, "after"); err == nil {
		t.Fatal("Config after, made after the backup, is there after the restore")
	}
	for _, m := range c.Managers[1:] {
		m.Restart()
		if _, err := m.Bare().JoinCluster(context.Background(), token, m0.Addr, "manager"); err != nil {
			t.Fatalf("joining %s again with the backed-up token: %v", m.Addr, err)
		}
	}
	c.WaitVoters(3)
	c.Workers[0].Restart()
	agent.start()
	waitFor(t, "the worker's task adopted and ready", func() bool {
		o, err := cl.Get(context.Background(), legion.KindTask, legion.DefaultNamespace, task.Metadata.Name)
		if err != nil {
			return false
		}
		tk := o.(*legion.Task)
		return tk.Metadata.UID == task.Metadata.UID && tk.Status.Ready && tk.Status.State == legion.TaskRunning
	})
	ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range ts {
		if tk := o.(*legion.Task); tk.Spec.Owner.Name == "web" && tk.Metadata.UID != task.Metadata.UID {
			t.Errorf("task %s was made after the restore: the running one was not adopted", tk.Metadata.Name)
		} else if tk.Spec.Owner.Name == "web" && tk.Status.Restarts != task.Status.Restarts {
			t.Errorf("task %s restarted %d times (%d before the backup): %+v", tk.Metadata.Name, tk.Status.Restarts, task.Status.Restarts, tk.Status)
		}
	}
	if got := containers(t, c.Workers[0].Dir); !maps.Equal(got, running) {
		t.Errorf("the worker's containers after the restore: %v, want the ones running before, adopted: %v", got, running)
	}
	newer := applyObjects(t, cl, strings.ReplaceAll(configManifest, "NAME", "newer"))[0].Object
	if v := newer.GetMetadata().Version; v <= before.GetMetadata().Version || v <= task.Metadata.Version {
		t.Fatalf("a write after the restore got version %d, not above what the backup held", v)
	}
}

// A three-manager cluster that lost two managers for good comes back
// from the survivor's own store: legion restore without a file.
func TestRestoreFromASurvivor(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3})
	cl := c.Client()
	kept := applyObjects(t, cl, strings.ReplaceAll(configManifest, "NAME", "kept"))[0].Object
	survivor := c.Managers[2]
	testcluster.WaitFor(t, "the survivor to hold the write", 10*time.Second, func() bool {
		_, _, err := survivor.Store().Get(legion.KindConfig, legion.DefaultNamespace, "kept")
		return err == nil
	})
	for _, m := range c.Managers {
		m.Stop()
	}
	if out, err := runLegion(t, "", "restore", "--data-dir", survivor.Dir); err != nil {
		t.Fatalf("legion restore from the survivor's store: %v\n%s", err, out)
	}
	survivor.Restart()
	testcluster.WaitFor(t, "the survivor to lead alone", 20*time.Second, func() bool {
		st := survivor.Store()
		return st != nil && st.IsLeader()
	})
	scl := c.ClientTo(survivor)
	got, err := getObject(t, scl, legion.KindConfig, legion.DefaultNamespace, "kept")
	if err != nil || got.GetMetadata().Version != kept.GetMetadata().Version {
		t.Fatalf("after the restore: %+v %v", got, err)
	}
	applyObjects(t, scl, strings.ReplaceAll(configManifest, "NAME", "new"))
}
