package daemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

// workerAgent runs an agent beside a test cluster's worker, as legion
// daemon does; stop and start take the node away and bring it back.
type workerAgent struct {
	t      testing.TB
	w      *testcluster.Manager
	o      Options
	cancel context.CancelFunc
	done   chan error
}

// startWorkerAgents runs an agent on each of the cluster's workers, with
// the test image loaded; their pods and VIPs are in the cluster's ranges
// (its own, from the harness).
func startWorkerAgents(t testing.TB, c *testcluster.Cluster) []*workerAgent {
	t.Helper()
	var out []*workerAgent
	for _, w := range c.Workers {
		a := &workerAgent{t: t, w: w, o: Options{DataDir: w.Dir, RunDir: filepath.Join(t.TempDir(), "run"),
			DNSListen: "127.0.0.1:0", Upstreams: []string{}}}
		t.Cleanup(func() { removeAllPods(t, w.Dir) })
		images, err := OpenImages(Options{DataDir: w.Dir, Platform: PlatformProcess}, nil)
		if err != nil {
			t.Fatal(err)
		}
		loadTestImage(t, images)
		images.Close()
		t.Cleanup(a.stop)
		a.start()
		out = append(out, a)
	}
	return out
}

func (a *workerAgent) start() {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.done = cancel, make(chan error, 1)
	srv := a.w.Server
	go func() { a.done <- RunAgent(ctx, srv, a.o, nil) }()
}

func (a *workerAgent) stop() {
	if a.cancel == nil {
		return
	}
	a.cancel()
	if err := <-a.done; err != nil {
		a.t.Errorf("agent of %s: %v", a.w.Server.NodeID(), err)
	}
	a.cancel = nil
}

// readyProbe are probe lines of statefulDB: readiness on /ready.
const readyProbe = `          readiness: {http: {path: /ready, port: http}, period: 200ms}
`

// statefulDB is a stateful service of two ordinals whose container runs
// the test server with args as uid 1000 with a claimed volume at /data;
// probes are lines under its probes:, pod lines (init containers) come
// after its containers, more lines at the end of its spec.
func statefulDB(args, probes, pod, more string) string {
	return `apiVersion: legion/v1
kind: Service
metadata: {name: db}
spec:
  mode: stateful
  replicas: 2
  pod:
    containers:
      - name: db
        image: ` + testImage + `
        pullPolicy: never
        user: "1000"
        args: ` + args + `
        ports: [{name: http, containerPort: 8080}]
        probes:
` + probes + `        volumeMounts: [{name: data, path: /data}]
` + pod + `    volumes:
      - name: data
        claim: {size: 64Mi}
` + more
}

func applyManifest(t *testing.T, cl *client.Client, manifest string) {
	t.Helper()
	objs, err := legion.ParseManifest("test.yaml", []byte(manifest))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Apply(context.Background(), objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ordinalTask is the live task of ordinal n of service db that ok
// accepts, or nil.
func ordinalTask(t *testing.T, cl *client.Client, n int, ok func(*legion.Task) bool) *legion.Task {
	t.Helper()
	ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
	if err != nil {
		return nil
	}
	for _, o := range ts {
		tk := o.(*legion.Task)
		if tk.Spec.Owner.Name == "db" && tk.Spec.Slot == n && tk.Spec.DesiredState == legion.TaskRunning && ok(tk) {
			return tk
		}
	}
	return nil
}

func readyOn(node string) func(*legion.Task) bool {
	return func(tk *legion.Task) bool {
		return tk.Status.State == legion.TaskRunning && tk.Status.Ready && (node == "" || tk.Spec.Node == node)
	}
}

// inTask runs the test server with args in the task's container and
// returns its exit code and output.
func inTask(t *testing.T, cl *client.Client, task string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := cl.Exec(ctx, client.Target{Kind: legion.KindTask, Name: task},
		client.ExecOptions{Command: append([]string{"/app/server"}, args...), Stdout: &out, Stderr: &errOut})
	if err != nil {
		t.Fatalf("exec in %s: %v", task, err)
	}
	return code, out.String() + errOut.String()
}

func volumeOf(t *testing.T, cl *client.Client, name string) *legion.Volume {
	t.Helper()
	o, err := cl.Get(context.Background(), legion.KindVolume, legion.DefaultNamespace, name)
	if err != nil {
		t.Fatalf("volume %s: %v", name, err)
	}
	return o.(*legion.Volume)
}

func nodeOf(t *testing.T, cl *client.Client, name string) *legion.Node {
	t.Helper()
	o, err := cl.Get(context.Background(), legion.KindNode, "", name)
	if err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	return o.(*legion.Node)
}

func setAvailability(t *testing.T, cl *client.Client, name string, a legion.Availability) {
	t.Helper()
	n := nodeOf(t, cl, name)
	n.Spec.Availability = a
	if _, err := cl.ApplyOne(context.Background(), n, client.ApplyOptions{}); err != nil {
		t.Fatalf("node %s to %s: %v", name, a, err)
	}
}

func marker(t *testing.T) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "/data/marker-" + hex.EncodeToString(b)
}

// A stateful service on three managers and two workers keeps its data:
// its containers, running as uid 1000, write their volumes; draining the
// node of ordinal 0 moves that volume, the drain listing it while it
// moves and saying completed only after, and the new task reads what the
// old one wrote; a worker taken away leaves its ordinals waiting, named
// after their volume and node, and they come back on it with their data.
func TestStatefulServiceKeepsItsDataThroughDrainAndNodeLoss(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3, Leader: true, Workers: 2})
	cl := c.Client()
	agents := startWorkerAgents(t, c)
	applyManifest(t, cl, statefulDB(listen8080, readyProbe, "", ""))
	var db [2]*legion.Task
	poll(t, "both ordinals ready", 90*time.Second, func() bool {
		db[0], db[1] = ordinalTask(t, cl, 0, readyOn("")), ordinalTask(t, cl, 1, readyOn(""))
		return db[0] != nil && db[1] != nil
	})
	marks := [2]string{marker(t), marker(t)}
	for i, tk := range db {
		if code, out := inTask(t, cl, tk.Metadata.Name, "-touch", marks[i]); code != 0 {
			t.Fatalf("uid 1000 writing its volume in %s: exit %d: %s", tk.Metadata.Name, code, out)
		}
		if v := volumeOf(t, cl, "data-db-"+string(rune('0'+i))); v.Status.Node != tk.Spec.Node {
			t.Fatalf("volume %s is bound to %q, its task runs on %s", v.Metadata.Name, v.Status.Node, tk.Spec.Node)
		}
	}

	// Drain the node of ordinal 0.
	from := db[0].Spec.Node
	to := c.Workers[0].Server.NodeID()
	if to == from {
		to = c.Workers[1].Server.NodeID()
	}
	setAvailability(t, cl, from, legion.AvailabilityDrain)
	sawMoving := false
	poll(t, "the drain of "+from+" to complete", 120*time.Second, func() bool {
		d := nodeOf(t, cl, from).Status.Drain
		if d == nil {
			return false
		}
		for _, it := range d.Remaining {
			if it.Kind == legion.KindVolume && it.Name == "default/data-db-0" {
				sawMoving = true
			}
		}
		if d.State == legion.DrainCompleted {
			if v := volumeOf(t, cl, "data-db-0"); v.Status.Node != to || v.Status.Migration != nil {
				t.Fatalf("the drain completed with volume data-db-0 on %q (migration %+v), want it on %s", v.Status.Node, v.Status.Migration, to)
			}
			return true
		}
		return false
	})
	if !sawMoving {
		t.Error("the drain never listed volume default/data-db-0 while it moved")
	}
	var moved *legion.Task
	poll(t, "ordinal 0 ready on "+to, 60*time.Second, func() bool {
		moved = ordinalTask(t, cl, 0, readyOn(to))
		return moved != nil
	})
	if code, out := inTask(t, cl, moved.Metadata.Name, "-cat", marks[0]); code != 0 {
		t.Fatalf("the moved ordinal 0 lost its data: %s: exit %d: %s", marks[0], code, out)
	}

	// Take away the node now holding both ordinals; the drained one is
	// back in service, so only the volumes keep the ordinals off it.
	setAvailability(t, cl, from, legion.AvailabilityActive)
	var lost *workerAgent
	for _, a := range agents {
		if a.w.Server.NodeID() == to {
			lost = a
		}
	}
	lost.stop()
	lost.w.Stop()
	poll(t, "ordinal 0 waiting for its volume's node", 90*time.Second, func() bool {
		ts, _, err := cl.List(context.Background(), legion.KindTask, client.ListOptions{Namespace: legion.DefaultNamespace})
		if err != nil {
			return false
		}
		for _, o := range ts {
			tk := o.(*legion.Task)
			if tk.Spec.Owner.Name != "db" || tk.Spec.Slot != 0 || tk.Spec.DesiredState != legion.TaskRunning {
				continue
			}
			if tk.Spec.Node == from {
				t.Fatalf("ordinal 0 was placed on %s while its volume is on %s", from, to)
			}
			if tk.Status.State == legion.TaskPending && strings.Contains(tk.Status.Message, "data-db-0") && strings.Contains(tk.Status.Message, to) {
				return true
			}
		}
		return false
	})
	lost.w.Restart()
	lost.start()
	poll(t, "ordinal 0 back on "+to, 120*time.Second, func() bool {
		moved = ordinalTask(t, cl, 0, readyOn(to))
		return moved != nil
	})
	if code, out := inTask(t, cl, moved.Metadata.Name, "-cat", marks[0]); code != 0 {
		t.Fatalf("ordinal 0 came back without its data: exit %d: %s", code, out)
	}
	if tk := ordinalTask(t, cl, 0, func(tk *legion.Task) bool { return tk.Spec.Node == from }); tk != nil {
		t.Fatalf("ordinal 0 has a task on %s: %s", from, tk.Metadata.Name)
	}
}

// treeSum hashes a directory tree: every path, mode, owner and content.
func treeSum(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(h, "%s %v %d:%d\n", rel, fi.Mode(), st.Uid, st.Gid)
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("hashing %s: %v", root, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// A stateful update with update.snapshot whose new version writes its
// volume and then fails its liveness probe rolls back, and the rollback
// restores the snapshot: what the failed version wrote is gone, what was
// there before stays. A backup of a volume restored on the other node
// under a new name holds the same data.
func TestStatefulSnapshotRollbackAndVolumeBackup(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Leader: true, Workers: 2})
	cl := c.Client()
	startWorkerAgents(t, c)
	update := "  update: {snapshot: true, failureAction: rollback, monitor: 5s}\n"
	applyManifest(t, cl, statefulDB(listen8080, readyProbe, "", update))
	var db1 *legion.Task
	poll(t, "both ordinals ready", 90*time.Second, func() bool {
		db1 = ordinalTask(t, cl, 1, readyOn(""))
		return ordinalTask(t, cl, 0, readyOn("")) != nil && db1 != nil
	})
	before := marker(t)
	if code, out := inTask(t, cl, db1.Metadata.Name, "-touch", before); code != 0 {
		t.Fatalf("writing %s: exit %d: %s", before, code, out)
	}

	// The new version's init container writes the volume; its server
	// then fails its liveness probe.
	broken := marker(t)
	applyManifest(t, cl, statefulDB(`[-listen, "$(LEGION_POD_IP):8080", -dead, /app/server]`,
		readyProbe+"          liveness: {http: {path: /live, port: http}, period: 200ms}\n",
		`    initContainers:
      - name: writer
        image: `+testImage+`
        pullPolicy: never
        user: "1000"
        args: [-touch, `+broken+`]
        volumeMounts: [{name: data, path: /data}]
`, update))
	poll(t, "the update to roll back", 120*time.Second, func() bool {
		o, err := cl.Get(context.Background(), legion.KindService, legion.DefaultNamespace, "db")
		if err != nil {
			return false
		}
		s := o.(*legion.Service)
		return s.Status.Update != nil && s.Status.Update.State == legion.UpdateRolledBack &&
			ordinalTask(t, cl, 1, readyOn("")) != nil && ordinalTask(t, cl, 0, readyOn("")) != nil
	})
	db1 = ordinalTask(t, cl, 1, readyOn(""))
	if code, out := inTask(t, cl, db1.Metadata.Name, "-cat", broken); code == 0 {
		t.Fatalf("after the rollback %s, written by the failed version, is still there: %s", broken, out)
	}
	if code, out := inTask(t, cl, db1.Metadata.Name, "-cat", before); code != 0 {
		t.Fatalf("after the rollback %s, written before the update, is gone: %s", before, out)
	}

	// Back up ordinal 1's volume and restore it on the other worker.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var backup bytes.Buffer
	h, err := cl.BackupVolume(ctx, legion.DefaultNamespace, "data-db-1", &backup)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	var other *testcluster.Manager
	for _, w := range c.Workers {
		if w.Server.NodeID() != db1.Spec.Node {
			other = w
		}
	}
	src := c.Workers[0]
	if src == other {
		src = c.Workers[1]
	}
	h.Name, h.Node = "restored", other.Server.NodeID()
	v, err := cl.RestoreVolume(ctx, h, &backup)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if v.Status.Node != other.Server.NodeID() {
		t.Fatalf("the restored volume is on %q, want %s", v.Status.Node, other.Server.NodeID())
	}
	// The dir store keeps a volume's data under <data-dir>/volumes/<ns>/<name>/data.
	want := treeSum(t, filepath.Join(src.Dir, "volumes", "default", "data-db-1", "data"))
	if got := treeSum(t, filepath.Join(other.Dir, "volumes", "default", "restored", "data")); got != want {
		t.Fatalf("the restored volume differs from the original: %s, want %s", got, want)
	}
	if _, err := cl.RestoreVolume(ctx, h, bytes.NewReader(nil)); err == nil {
		t.Fatal("a second restore under the same name succeeded")
	}
}
