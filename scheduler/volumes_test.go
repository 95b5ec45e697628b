package scheduler_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/scheduler/schedtest"
)

// boundDB runs replicas ordinals of db on nodes n1..n<nodes>, each
// ordinal's Volume bound to the node its task runs on, as the agents'
// first claims leave them.
func boundDB(t *testing.T, nodes int, replicas string) *schedtest.Cluster {
	t.Helper()
	c := schedtest.WithNodes(t, nodes)
	c.ApplyAndConverge(db(replicas, "db:1", "1Gi"))
	for _, tk := range c.Live("db") {
		node := tk.Spec.Node
		c.SetVolume(tk.Spec.Volumes["data"], func(v *legion.Volume) { v.Status.Node = node })
	}
	c.Converge()
	return c
}

// liveIn returns the live task of db's ordinal.
func liveIn(t *testing.T, c *schedtest.Cluster, ordinal int) *legion.Task {
	t.Helper()
	var out *legion.Task
	for _, tk := range c.Live("db") {
		if tk.Spec.Slot == ordinal {
			if out != nil {
				t.Fatalf("two live tasks in ordinal %d: %s and %s", ordinal, out.Metadata.Name, tk.Metadata.Name)
			}
			out = tk
		}
	}
	if out == nil {
		t.Fatalf("no live task in ordinal %d: %v", ordinal, describeTasks(c.OwnerTasks("db")))
	}
	return out
}

func migrationOf(c *schedtest.Cluster, name string) legion.VolumeMigration {
	if m := c.Volume(name).Status.Migration; m != nil {
		return *m
	}
	return legion.VolumeMigration{}
}

func TestTaskWaitsForItsVolumesDownNodeAndNeverStartsElsewhere(t *testing.T) {
	t.Parallel()
	c := boundDB(t, 3, "1")
	node := liveIn(t, c, 0).Spec.Node
	c.Silent[node] = true
	c.Run(20 * time.Second) // past eight missed heartbeats
	if st := c.Node(node).Status.State; st != legion.NodeDown {
		t.Fatalf("node %s is %s, want down", node, st)
	}
	if st := c.Task("db-0-1").Status.State; st != legion.TaskOrphaned {
		t.Fatalf("db-0-1 on the down node is %s, want orphaned", st)
	}
	next := liveIn(t, c, 0)
	want := "waiting for volume default/data-db-0 on node " + node + ", which is down"
	if next.Status.State != legion.TaskPending || next.Spec.Placed != nil || next.Spec.Node != "" || next.Status.Message != want {
		t.Fatalf("%s: %s on %q placed %v, %q; want pending, unplaced, %q", next.Metadata.Name, next.Status.State,
			next.Spec.Node, next.Spec.Placed, next.Status.Message, want)
	}
	// Back, it runs there with its data.
	delete(c.Silent, node)
	c.Run(2 * time.Second)
	if got := liveIn(t, c, 0); got.Spec.Node != node || got.Status.State != legion.TaskRunning {
		t.Fatalf("after the node is back: %s %s on %s, want running on %s", got.Metadata.Name, got.Status.State, got.Spec.Node, node)
	}
}

const lunYAML = `
apiVersion: legion/v1
kind: Volume
metadata: {name: lun}
spec: {driver: iscsi, iscsi: {portal: 127.0.0.1, target: iqn.x, lun: 0}}
---
apiVersion: legion/v1
kind: Service
metadata: {name: app}
spec:
  replicas: 1
  pod:
    containers: [{name: app, image: app:1, volumeMounts: [{name: lun, path: /data}]}]
    volumes: [{name: lun, volume: {name: lun}}]
`

func TestHeldISCSIVolumePinsItsTasks(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 3)
	c.Apply(lunYAML)
	c.SetVolume("lun", func(v *legion.Volume) { v.Status.Node = "n3" })
	c.Converge()
	if diff := cmp.Diff(map[string]int{"n3": 1}, c.NodesOf("app")); diff != "" {
		t.Fatalf("a held LUN pins its tasks (-want +got):\n%s", diff)
	}
	c.SetAvailability("n3", legion.AvailabilityPause)
	c.Fail("app-1-1", "killed")
	c.Run(2 * time.Second)
	live := c.Live("app")
	want := "waiting for volume default/lun, held by node n3, which is paused"
	if len(live) != 1 || live[0].Spec.Placed != nil || live[0].Status.Message != want {
		t.Fatalf("%v, want one pending task saying %q", describeTasks(live), want)
	}
	// Released (no node holds it), it goes anywhere.
	c.SetVolume("lun", func(v *legion.Volume) { v.Status.Node = "" })
	c.Converge()
	if got := c.Live("app"); len(got) != 1 || got[0].Status.State != legion.TaskRunning || got[0].Spec.Node == "n3" {
		t.Fatalf("after the release: %v", describeTasks(got))
	}
}

func TestRemovedNodeFreesItsVolumes(t *testing.T) {
	t.Parallel()
	c := boundDB(t, 3, "2")
	gone, kept := liveIn(t, c, 1).Spec.Node, liveIn(t, c, 0).Spec.Node
	c.Apply(lunYAML)
	c.SetVolume("lun", func(v *legion.Volume) { v.Status.Node = gone })
	c.SetVolume("data-db-1", func(v *legion.Volume) {
		v.Status.Backend, v.Status.Snapshots = "directory /var/db/legion/volumes/default/data-db-1", []string{"legion-update-2"}
	})
	c.RemoveNode(gone)
	r := c.Plan()
	var written []string
	for _, v := range r.UpdateVolumes {
		written = append(written, v.Metadata.Name)
	}
	if diff := cmp.Diff([]string{"data-db-1", "lun"}, written); diff != "" {
		t.Fatalf("volume writes (-want +got):\n%s", diff)
	}
	want := legion.VolumeStatus{Message: "node " + gone + " was removed; the data it held went with it"}
	if diff := cmp.Diff(want, c.Volume("data-db-1").Status); diff != "" {
		t.Fatalf("zfs volume of the removed node (-want +got):\n%s", diff)
	}
	if v := c.Volume("lun"); v.Status.Node != "" || !strings.Contains(v.Status.Message, "node "+gone+" was removed") {
		t.Fatalf("lun: %+v", v.Status)
	}
	if v := c.Volume("data-db-0"); v.Status.Node != kept {
		t.Fatalf("data-db-0 on %s, which is still here: %+v", kept, v.Status)
	}
	// Nothing changes on the next pass: no rewrite.
	if r := c.Plan(); len(r.UpdateVolumes) != 0 {
		t.Fatalf("second pass rewrites %d volumes", len(r.UpdateVolumes))
	}
}

func drainItems(c *schedtest.Cluster, node string) []legion.DrainItem {
	if ds := c.Node(node).Status.Drain; ds != nil {
		return ds.Remaining
	}
	return nil
}

// A backup of an ordinal's Volume restored under another name keeps its
// labels, but it is no ordinal's Volume: a drain neither moves it nor
// waits for it.
func TestDrainLeavesARestoredCopyOfAnOrdinalsVolume(t *testing.T) {
	t.Parallel()
	c := boundDB(t, 3, "2")
	from := liveIn(t, c, 0).Spec.Node
	c.Apply(`apiVersion: legion/v1
kind: Volume
metadata: {name: db-0-copy, labels: {legion.service: db, legion.ordinal: "0"}}
spec: {driver: zfs, size: 1Gi}
`)
	c.SetVolume("db-0-copy", func(v *legion.Volume) { v.Status.Node = from })
	c.SetAvailability(from, legion.AvailabilityDrain)
	c.Converge()
	if m := c.Volume("db-0-copy").Status.Migration; m != nil {
		t.Fatalf("the restored copy is moving: %+v", m)
	}
	if m := c.Volume("data-db-0").Status.Migration; m == nil {
		t.Fatal("the ordinal's own Volume is not moving")
	}
	for _, it := range drainItems(c, from) {
		if strings.Contains(it.Name, "db-0-copy") {
			t.Fatalf("the drain waits for the restored copy: %+v", drainItems(c, from))
		}
	}
}

func TestDrainMovesAStatefulVolumeAndCompletesOnlyOnceMoved(t *testing.T) {
	t.Parallel()
	c := boundDB(t, 3, "2")
	from, other := liveIn(t, c, 0).Spec.Node, liveIn(t, c, 1).Spec.Node
	to := ""
	for _, n := range []string{"n1", "n2", "n3"} {
		if n != from && n != other {
			to = n // the one without a task of db
		}
	}
	c.SetAvailability(from, legion.AvailabilityDrain)
	c.Converge()
	if diff := cmp.Diff(legion.VolumeMigration{State: legion.MigrationCopying, From: from, To: to}, migrationOf(c, "data-db-0")); diff != "" {
		t.Fatalf("migration (-want +got):\n%s", diff)
	}
	first := liveIn(t, c, 0)
	if first.Metadata.Name != "db-0-1" || first.Spec.DesiredState != legion.TaskRunning {
		t.Fatalf("while copying, the task runs on: %s desired %s", first.Metadata.Name, first.Spec.DesiredState)
	}
	wantItems := []legion.DrainItem{
		{Kind: legion.KindTask, Name: "default/db-0-1", Reason: "waiting for volume default/data-db-0 to be copied to node " + to},
		{Kind: legion.KindVolume, Name: "default/data-db-0", Reason: "copying to node " + to},
	}
	if diff := cmp.Diff(wantItems, drainItems(c, from)); diff != "" {
		t.Fatalf("drain while copying (-want +got):\n%s", diff)
	}

	// The migrator has the full copy in: the task stops, and only once it
	// has stopped is the migration finishing.
	c.SetVolume("data-db-0", func(v *legion.Volume) { v.Status.Migration.State = legion.MigrationCopied })
	c.Plan()
	if tk := c.Task("db-0-1"); tk.Spec.DesiredState != legion.TaskShutdown {
		t.Fatalf("copied: db-0-1 desired %s, want shutdown", tk.Spec.DesiredState)
	}
	if st := migrationOf(c, "data-db-0").State; st != legion.MigrationCopied {
		t.Fatalf("with db-0-1 still running: migration %s, want copied", st)
	}
	c.Agents()
	c.Converge()
	if st := migrationOf(c, "data-db-0").State; st != legion.MigrationFinishing {
		t.Fatalf("db-0-1 stopped: migration %s, want finishing", st)
	}
	next := liveIn(t, c, 0)
	if want := "volume default/data-db-0 is moving to node " + to; next.Spec.Placed != nil || next.Status.Message != want {
		t.Fatalf("next task %s placed %v %q, want it waiting: %q", next.Metadata.Name, next.Spec.Placed, next.Status.Message, want)
	}
	ds := c.Node(from).Status.Drain
	wantItems = []legion.DrainItem{{Kind: legion.KindVolume, Name: "default/data-db-0", Reason: "finishing on node " + to}}
	if ds == nil || ds.State != legion.DrainDraining || !cmp.Equal(wantItems, ds.Remaining) {
		t.Fatalf("drain while finishing: %+v", ds)
	}

	// The migrator binds it to the new node: the task starts there and the
	// drain is done.
	c.SetVolume("data-db-0", func(v *legion.Volume) { v.Status.Node, v.Status.Migration = to, nil })
	c.Converge()
	if got := liveIn(t, c, 0); got.Spec.Node != to || got.Status.State != legion.TaskRunning {
		t.Fatalf("after the move: %s %s on %s, want running on %s", got.Metadata.Name, got.Status.State, got.Spec.Node, to)
	}
	if ds := c.Node(from).Status.Drain; ds == nil || ds.State != legion.DrainCompleted {
		t.Fatalf("drain after the move: %+v", ds)
	}
}

// drainingN1 is db's ordinal 0 on n1 of three nodes, its Volume bound
// there, with n1 draining and the Volume being copied to n2.
func drainingDB(t *testing.T) *schedtest.Cluster {
	t.Helper()
	c := boundDB(t, 3, "1")
	if n := liveIn(t, c, 0).Spec.Node; n != "n1" {
		t.Fatalf("db-0 on %s, want n1", n)
	}
	c.SetAvailability("n1", legion.AvailabilityDrain)
	c.Converge()
	if m := migrationOf(c, "data-db-0"); m.To != "n2" || m.State != legion.MigrationCopying {
		t.Fatalf("migration %+v, want copying to n2", m)
	}
	return c
}

func TestMigrationTargetDownRestartsElsewhereSuspectKeepsIt(t *testing.T) {
	t.Parallel()
	c := drainingDB(t)
	c.Silent["n2"] = true
	c.Run(8 * time.Second) // suspect, not down
	if st := c.Node("n2").Status.State; st != legion.NodeSuspect {
		t.Fatalf("n2 is %s, want suspect", st)
	}
	if m := migrationOf(c, "data-db-0"); m.To != "n2" {
		t.Fatalf("target only suspect: migration %+v, want it kept", m)
	}
	c.Run(10 * time.Second)
	if st := c.Node("n2").Status.State; st != legion.NodeDown {
		t.Fatalf("n2 is %s, want down", st)
	}
	if diff := cmp.Diff(legion.VolumeMigration{State: legion.MigrationCopying, From: "n1", To: "n3"}, migrationOf(c, "data-db-0")); diff != "" {
		t.Fatalf("target down (-want +got):\n%s", diff)
	}
	if tk := liveIn(t, c, 0); tk.Metadata.Name != "db-0-1" || tk.Spec.DesiredState != legion.TaskRunning {
		t.Fatalf("the task keeps running while the copy starts over: %s %s", tk.Metadata.Name, tk.Spec.DesiredState)
	}
}

func TestMigrationTargetRemovedOrPausedRestartsElsewhere(t *testing.T) {
	t.Parallel()
	c := drainingDB(t)
	c.SetAvailability("n2", legion.AvailabilityPause)
	c.Converge()
	if m := migrationOf(c, "data-db-0"); m.To != "n3" || m.State != legion.MigrationCopying {
		t.Fatalf("target paused: migration %+v, want copying to n3", m)
	}
	c.RemoveNode("n3")
	c.Converge()
	want := legion.DrainItem{Kind: legion.KindVolume, Name: "default/data-db-0", Reason: "waiting: no node can take it"}
	if m := c.Volume("data-db-0").Status.Migration; m != nil {
		t.Fatalf("target removed, no other node: migration %+v, want none", m)
	}
	if items := drainItems(c, "n1"); !cmp.Equal(items[len(items)-1], want) || c.Node("n1").Status.Drain.State == legion.DrainCompleted {
		t.Fatalf("drain %+v, want it waiting on %+v", c.Node("n1").Status.Drain, want)
	}
}

func TestMigrationDroppedWhenTheDrainStopsBeforeFinishing(t *testing.T) {
	t.Parallel()
	c := drainingDB(t)
	c.SetVolume("data-db-0", func(v *legion.Volume) { v.Status.Migration.State = legion.MigrationCopied })
	c.SetAvailability("n1", legion.AvailabilityActive)
	r := c.Plan()
	if m := c.Volume("data-db-0").Status.Migration; m != nil || len(r.UpdateVolumes) != 1 {
		t.Fatalf("n1 active again before finishing: migration %+v, want it dropped", m)
	}
	if tk := c.Task("db-0-1"); tk.Spec.DesiredState != legion.TaskRunning || c.Node("n1").Status.Drain != nil {
		t.Fatalf("db-0-1 desired %s, drain %+v", tk.Spec.DesiredState, c.Node("n1").Status.Drain)
	}
	// Once finishing, the last part goes whatever n1 does.
	c.SetAvailability("n1", legion.AvailabilityDrain)
	c.Converge()
	c.SetVolume("data-db-0", func(v *legion.Volume) { v.Status.Migration.State = legion.MigrationCopied })
	c.Converge()
	if st := migrationOf(c, "data-db-0").State; st != legion.MigrationFinishing {
		t.Fatalf("migration %s, want finishing", st)
	}
	c.SetAvailability("n1", legion.AvailabilityActive)
	c.Converge()
	if m := migrationOf(c, "data-db-0"); m.State != legion.MigrationFinishing || m.To != "n2" {
		t.Fatalf("finishing, n1 active again: migration %+v, want it kept", m)
	}
}

func TestMigrationWaitsForTheNextAttempt(t *testing.T) {
	t.Parallel()
	c := drainingDB(t)
	c.SetVolume("data-db-0", func(v *legion.Volume) { v.Status.Migration.State = legion.MigrationCopied })
	c.Converge() // db-0-1 stops; finishing
	next := c.Now.Add(5 * time.Second)
	c.SetVolume("data-db-0", func(v *legion.Volume) {
		m := v.Status.Migration
		m.State, m.Attempt, m.NextAttempt, m.Message = legion.MigrationCopied, 2, &next, "last part cut short"
	})
	r := c.Plan()
	if st := migrationOf(c, "data-db-0").State; st != legion.MigrationCopied || len(r.UpdateVolumes) != 0 {
		t.Fatalf("before the next attempt: migration %s, %d volume writes; want copied, none", st, len(r.UpdateVolumes))
	}
	if !r.NextWake.Equal(next) {
		t.Fatalf("next wake %v, want the next attempt %v", r.NextWake, next)
	}
	want := legion.DrainItem{Kind: legion.KindVolume, Name: "default/data-db-0",
		Reason: "copied to node n2, its tasks here stopping; attempt 2 failed: last part cut short"}
	if items := drainItems(c, "n1"); len(items) != 1 || items[0] != want {
		t.Fatalf("drain items %+v, want %+v", items, want)
	}
	c.Advance(5 * time.Second)
	c.Plan()
	want2 := legion.VolumeMigration{State: legion.MigrationFinishing, From: "n1", To: "n2", Attempt: 2, NextAttempt: &next, Message: "last part cut short"}
	if diff := cmp.Diff(want2, migrationOf(c, "data-db-0")); diff != "" {
		t.Fatalf("at the next attempt (-want +got):\n%s", diff)
	}
}

func TestVolumeMoveBySpecNode(t *testing.T) {
	t.Parallel()
	c := boundDB(t, 3, "1")
	c.SetAvailability("n3", legion.AvailabilityPause)
	c.SetVolume("data-db-0", func(v *legion.Volume) { v.Spec.Node = "n3" })
	c.Converge()
	if m := c.Volume("data-db-0").Status.Migration; m != nil {
		t.Fatalf("n3 paused: migration %+v, want none until it is active", m)
	}
	c.SetAvailability("n3", legion.AvailabilityActive)
	c.Converge()
	if diff := cmp.Diff(legion.VolumeMigration{State: legion.MigrationCopying, From: "n1", To: "n3"}, migrationOf(c, "data-db-0")); diff != "" {
		t.Fatalf("migration (-want +got):\n%s", diff)
	}
	if tk := c.Task("db-0-1"); tk.Spec.DesiredState != legion.TaskRunning {
		t.Fatalf("while copying db-0-1 is told %s", tk.Spec.DesiredState)
	}
	c.SetVolume("data-db-0", func(v *legion.Volume) { v.Status.Migration.State = legion.MigrationCopied })
	c.Converge()
	if tk := c.Task("db-0-1"); tk.Status.State != legion.TaskShutdown || tk.Status.Message != "" && !strings.Contains(tk.Status.Message, "moving to node n3") {
		t.Fatalf("copied: db-0-1 %s %q, want it stopped", tk.Status.State, tk.Status.Message)
	}
	if st := migrationOf(c, "data-db-0").State; st != legion.MigrationFinishing {
		t.Fatalf("migration %s, want finishing", st)
	}
	c.SetVolume("data-db-0", func(v *legion.Volume) { v.Status.Node, v.Status.Migration = "n3", nil })
	c.Converge()
	if got := liveIn(t, c, 0); got.Spec.Node != "n3" || got.Status.State != legion.TaskRunning {
		t.Fatalf("after the move: %s on %s", got.Status.State, got.Spec.Node)
	}
	if m := c.Volume("data-db-0").Status.Migration; m != nil {
		t.Fatalf("moved where asked: migration %+v, want none", m)
	}
}

// snapDB is db with update.snapshot and the given failure action.
func snapDB(image, action string) string {
	return strings.Replace(db("2", image, "1Gi"), "  mode: stateful",
		"  mode: stateful\n  update: {snapshot: true, failureAction: "+action+"}", 1)
}

func snapshotsOf(c *schedtest.Cluster) map[string]string {
	out := map[string]string{}
	for _, tk := range c.OwnerTasks("db") {
		s := "none"
		if sn := tk.Spec.Snapshot; sn != nil {
			s = sn.Name
			if sn.Restore {
				s = "restore " + sn.Name
			}
		}
		out[tk.Metadata.Name] = s
	}
	return out
}

func TestStatefulUpdateTasksSnapshotAndRollbacksRestore(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(snapDB("db:1", "pause"))
	c.Apply(snapDB("db:2", "pause"))
	c.Run(20 * time.Second)
	if u := c.Service("db").Status.Update; u == nil || u.State != legion.UpdateCompleted || u.Snapshot != "legion-update-2" {
		t.Fatalf("update %+v", u)
	}
	want := map[string]string{"db-0-1": "none", "db-1-1": "none", "db-0-2": "legion-update-2", "db-1-2": "legion-update-2"}
	if diff := cmp.Diff(want, snapshotsOf(c)); diff != "" {
		t.Fatalf("first deploy none, the update's tasks its snapshot (-want +got):\n%s", diff)
	}
	// legion rollback after the update completed: each task restores it.
	c.Apply(snapDB("db:1", "pause"))
	c.Run(20 * time.Second)
	if u := c.Service("db").Status.Update; u == nil || u.State != legion.UpdateRolledBack {
		t.Fatalf("rollback %+v", u)
	}
	want["db-0-3"], want["db-1-3"] = "restore legion-update-2", "restore legion-update-2"
	if diff := cmp.Diff(want, snapshotsOf(c)); diff != "" {
		t.Fatalf("rollback tasks restore (-want +got):\n%s", diff)
	}
	// A restart after the rollback keeps its data: no snapshot.
	c.Fail("db-1-3", "killed")
	c.Run(5 * time.Second)
	if s := snapshotsOf(c)["db-1-4"]; s != "none" {
		t.Fatalf("restart after the rollback: %s, want none", s)
	}
}

func TestStatefulAutomaticRollbackRestoresTheSnapshot(t *testing.T) {
	t.Parallel()
	c := schedtest.WithNodes(t, 2)
	c.ApplyAndConverge(snapDB("db:1", "rollback"))
	c.FailImages["db:bad"] = "probe failed"
	c.Apply(snapDB("db:bad", "rollback"))
	c.Run(30 * time.Second)
	s := c.Service("db")
	if u := s.Status.Update; u == nil || u.State != legion.UpdateRolledBack || u.Snapshot != "legion-update-2" {
		t.Fatalf("update %+v, want rolled back naming legion-update-2", u)
	}
	got := snapshotsOf(c)
	// Ordinal 1 went first (highest down): its update task failed, and the
	// rollback's task restores; ordinal 0 was never reached.
	if got["db-1-2"] != "legion-update-2" || got["db-0-1"] != "none" {
		t.Fatalf("snapshots %v", got)
	}
	restored := 0
	for name, s := range got {
		if s == "restore legion-update-2" {
			restored++
			if !strings.HasPrefix(name, "db-1-") {
				t.Fatalf("%s restores, but the update never reached ordinal 0", name)
			}
		}
	}
	if restored != 1 {
		t.Fatalf("snapshots %v, want one restoring task in ordinal 1", got)
	}
}
