package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// volumeCluster is a one-manager cluster (no controllers: the statuses
// written stay as written) with nodes w1..w3, namespace shop and its
// Volumes: db bound on w1, logs moving from w1 to w3, cache free, share
// an NFS export; db is used by a running task and was by one that
// ended, logs by a pending one.
type volumeCluster struct {
	st    *store.Store
	flags []string
	next  time.Time // logs' next migration attempt
}

func newVolumeCluster(t *testing.T) *volumeCluster {
	t.Helper()
	c := testcluster.New(t, testcluster.Options{})
	vc := &volumeCluster{st: c.Managers[0].Store(), flags: []string{"--server", c.Managers[0].Addr, "--credentials", c.AdminFile()}}
	ctx := context.Background()
	for _, n := range []string{"w1", "w2", "w3"} {
		vc.put(t, &legion.Node{Header: header(legion.KindNode, "", n),
			Spec: legion.NodeSpec{Role: legion.RoleWorker, Availability: legion.AvailabilityActive}})
	}
	objs, err := legion.ParseManifest("volumes.yaml", []byte(`
apiVersion: legion/v1
kind: Namespace
metadata: {name: shop}
spec: {}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: db, namespace: shop, labels: {app: db}}
spec: {driver: zfs, size: 10Gi}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: logs, namespace: shop}
spec: {driver: zfs, size: 1Gi, node: w3}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: cache, namespace: shop}
spec: {driver: zfs}
---
apiVersion: legion/v1
kind: Volume
metadata: {name: share, namespace: shop}
spec: {driver: nfs, nfs: {server: nas, path: /export/share}}
`))
	if err != nil {
		t.Fatal(err)
	}
	cl := c.Client()
	if _, err := cl.Apply(ctx, objs, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	next := time.Now().Add(time.Minute).Truncate(time.Second)
	vc.next = next
	vc.setStatus(t, "db", legion.VolumeStatus{Node: "w1", Backend: "dir /var/legion/volumes/shop/db", Snapshots: []string{"legion-update-2"}})
	vc.setStatus(t, "logs", legion.VolumeStatus{Node: "w1", Backend: "dir /var/legion/volumes/shop/logs",
		Migration: &legion.VolumeMigration{State: legion.MigrationCopying, From: "w1", To: "w3", Attempt: 2, NextAttempt: &next, Message: "w3: out of space"}})
	vc.task(t, "db-0-a", legion.TaskRunning, "w1", "db")
	vc.task(t, "db-0-old", legion.TaskFailed, "w1", "db")
	vc.task(t, "logs-1-a", legion.TaskPending, "", "logs")
	return vc
}

func header(kind legion.Kind, ns, name string) legion.Header {
	return legion.Header{APIVersion: "legion/v1", Kind: kind, Metadata: legion.Metadata{Namespace: ns, Name: name}}
}

func (vc *volumeCluster) put(t *testing.T, o legion.Object) {
	t.Helper()
	if _, _, err := vc.st.Put(context.Background(), o, store.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (vc *volumeCluster) volume(t *testing.T, name string) *legion.Volume {
	t.Helper()
	o, _, err := vc.st.Get(legion.KindVolume, "shop", name)
	if err != nil {
		t.Fatal(err)
	}
	return o.(*legion.Volume)
}

func (vc *volumeCluster) setStatus(t *testing.T, name string, s legion.VolumeStatus) {
	t.Helper()
	v := vc.volume(t, name)
	v.Status = s
	if _, err := vc.st.PutStatus(context.Background(), v, store.Precondition{}); err != nil {
		t.Fatal(err)
	}
}

func (vc *volumeCluster) task(t *testing.T, name string, state legion.TaskState, node, volume string) {
	t.Helper()
	vc.put(t, &legion.Task{Header: header(legion.KindTask, "shop", name),
		Spec: legion.TaskSpec{Owner: legion.Owner{Kind: legion.KindService, Name: strings.Split(name, "-")[0]}, Node: node,
			DesiredState: legion.TaskRunning, Volumes: map[string]string{"data": volume}},
		Status: legion.TaskStatus{State: state}})
}

func (vc *volumeCluster) legion(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runLegion(t, "", append(args, vc.flags...)...)
}

// tableRows splits a table's lines into cells (columns are two or more
// spaces apart).
func tableRows(out string) [][]string {
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
	}
	return rows
}

func TestVolumeListGetAndMove(t *testing.T) {
	t.Parallel()
	vc := newVolumeCluster(t)

	t.Run("ls", func(t *testing.T) {
		out, err := vc.legion(t, "volume", "ls", "-n", "shop")
		if err != nil {
			t.Fatal(err)
		}
		want := [][]string{
			{"NAME", "DRIVER", "SIZE", "NODE", "STATE", "USED BY"},
			{"cache", "zfs", "-", "-", "free", "-"},
			{"db", "zfs", "10Gi", "w1", "bound", "db-0-a"},
			{"logs", "zfs", "1Gi", "w1", "moving w1→w3 (copying)", "logs-1-a"},
			{"share", "nfs", "-", "-", "free", "-"},
		}
		if diff := cmp.Diff(want, tableRows(out)); diff != "" {
			t.Errorf("volume ls (-want +got):\n%s\n%s", diff, out)
		}
		out, err = vc.legion(t, "volume", "ls", "-A")
		if rows := tableRows(out); err != nil || rows[0][0] != "NAMESPACE" || len(rows) != 5 || rows[1][0] != "shop" {
			t.Errorf("volume ls -A: %v\n%s", err, out)
		}
		out, err = vc.legion(t, "volume", "ls", "-n", "shop", "-o", "json")
		var vols []legion.Volume
		if err != nil || json.Unmarshal([]byte(out), &vols) != nil || len(vols) != 4 || vols[2].Status.Migration == nil {
			t.Errorf("volume ls -o json: %v\n%s", err, out)
		}
	})

	t.Run("get", func(t *testing.T) {
		out, err := vc.legion(t, "volume", "get", "logs", "-n", "shop")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Name:", "shop/logs", "Wanted on:", "w3", "dir /var/legion/volumes/shop/logs", "moving w1→w3 (copying)",
			"Migration:", "copying from w1 to w3", "Attempt:", "2", "Next attempt:", vc.next.UTC().Format(time.RFC3339) + " (in ", "w3: out of space", "logs-1-a (pending on -)"} {
			if !strings.Contains(out, want) {
				t.Errorf("volume get lacks %q:\n%s", want, out)
			}
		}
		out, err = vc.legion(t, "volume", "get", "db", "-n", "shop")
		for _, want := range []string{"legion-update-2", "db-0-a (running on w1)", "app=db"} {
			if err != nil || !strings.Contains(out, want) {
				t.Errorf("volume get db lacks %q (%v):\n%s", want, err, out)
			}
		}
		if strings.Contains(out, "db-0-old") {
			t.Errorf("volume get db lists a task that ended:\n%s", out)
		}
		out, err = vc.legion(t, "volume", "get", "db", "-n", "shop", "-o", "yaml")
		objs, perr := legion.ParseManifest("out.yaml", []byte(out))
		if err != nil || perr != nil || len(objs) != 1 || objs[0].GetMetadata().Name != "db" {
			t.Errorf("volume get -o yaml: %v %v\n%s", err, perr, out)
		}
		if _, err := vc.legion(t, "volume", "get", "nope", "-n", "shop"); err == nil || !strings.Contains(err.Error(), "volume nope") {
			t.Errorf("get of a missing volume: %v", err)
		}
	})

	t.Run("move", func(t *testing.T) {
		out, err := vc.legion(t, "volume", "move", "db", "--node", "w2", "-n", "shop")
		if err != nil {
			t.Fatal(err)
		}
		if want := "volume/db -n shop moving from w1 to w2: its tasks on w1 stop once the copy is in\n"; out != want {
			t.Errorf("move output %q, want %q", out, want)
		}
		v := vc.volume(t, "db")
		if v.Spec.Node != "w2" || v.Status.Node != "w1" || v.Spec.Size != 10<<30 || v.Metadata.Labels["app"] != "db" {
			t.Errorf("after move: spec %+v, status node %q, labels %v", v.Spec, v.Status.Node, v.Metadata.Labels)
		}

		_, err = vc.legion(t, "volume", "move", "share", "--node", "w2", "-n", "shop")
		if err == nil || !strings.Contains(err.Error(), "volume shop/share is nfs: only zfs Volumes") {
			t.Errorf("move of an nfs volume: %v", err)
		}
		if n := vc.volume(t, "share").Spec.Node; n != "" {
			t.Errorf("the refused move wrote spec.node %q", n)
		}
		_, err = vc.legion(t, "volume", "move", "cache", "--node", "w9", "-n", "shop")
		if err == nil || !strings.Contains(err.Error(), "node w9: no such node") {
			t.Errorf("move to an unknown node: %v", err)
		}
		if n := vc.volume(t, "cache").Spec.Node; n != "" {
			t.Errorf("the refused move wrote spec.node %q", n)
		}
		if _, err := vc.legion(t, "volume", "move", "gone", "--node", "w2", "-n", "shop"); err == nil || !strings.Contains(err.Error(), "volume gone") {
			t.Errorf("move of a missing volume: %v", err)
		}

		// The node as the second word, as the spec writes it; given both
		// ways it must be the same node.
		out, err = vc.legion(t, "volume", "move", "cache", "w2", "-n", "shop")
		if err != nil || !strings.Contains(out, "volume/cache -n shop configured") || vc.volume(t, "cache").Spec.Node != "w2" {
			t.Errorf("move VOLUME NODE: %v, spec.node %q\n%s", err, vc.volume(t, "cache").Spec.Node, out)
		}
		if _, err := vc.legion(t, "volume", "move", "cache", "w2", "--node", "w2", "-n", "shop"); err != nil {
			t.Errorf("move with NODE and --node the same: %v", err)
		}
		_, err = vc.legion(t, "volume", "move", "cache", "w1", "--node", "w3", "-n", "shop")
		if err == nil || !strings.Contains(err.Error(), "volume move: NODE w1 and --node w3 name different nodes") {
			t.Errorf("move with NODE and --node different: %v", err)
		}
		if _, err := vc.legion(t, "volume", "move", "cache", "-n", "shop"); err == nil || !strings.Contains(err.Error(), "volume move: NODE is required") {
			t.Errorf("move without a node: %v", err)
		}
		if n := vc.volume(t, "cache").Spec.Node; n != "w2" {
			t.Errorf("a refused move wrote spec.node %q", n)
		}
	})

	t.Run("move --wait", func(t *testing.T) {
		done := make(chan error, 1)
		var out syncBuffer
		go func() {
			root := rootWith(&out, &out, append([]string{"volume", "move", "logs", "--node", "w3", "-n", "shop", "--wait", "--timeout", "30s"}, vc.flags...)...)
			done <- root.Execute()
		}()
		waitFor(t, "move --wait to report the migration", func() bool { return strings.Contains(out.String(), "w3: out of space") })
		select {
		case err := <-done:
			t.Fatalf("move --wait returned while the volume still moves: %v\n%s", err, out.String())
		default:
		}
		vc.setStatus(t, "logs", legion.VolumeStatus{Node: "w3", Backend: "dir /var/legion/volumes/shop/logs"})
		if err := <-done; err != nil || !strings.Contains(out.String(), "volume/logs -n shop moved: bound on w3") {
			t.Fatalf("move --wait: %v\n%s", err, out.String())
		}
		_, err := vc.legion(t, "volume", "move", "cache", "--node", "w2", "-n", "shop", "--wait", "--timeout", "1s")
		if err != nil {
			t.Fatalf("move of a free volume: %v", err)
		}
	})
}

// fakeManager serves Volumes as vols does and Objects.Get from objs
// (keyed by legion.Key) with mutual TLS, and returns the CLI's --server
// and --credentials flags for it.
func fakeManager(t *testing.T, vols pb.VolumesServer, objs ...legion.Object) []string {
	t.Helper()
	ca := dispatchertest.NewCA(t)
	mgr, _ := dispatchertest.Issue(t, ca, "m1", pki.RoleManager)
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(mgr.ServerConfig())))
	pb.RegisterVolumesServer(g, vols)
	known := map[string]legion.Object{}
	for _, o := range objs {
		known[legion.ObjectKey(o)] = o
	}
	pb.RegisterObjectsServer(g, fakeObjects{known: known})
	lis := dispatchertest.Listen(t)
	served := make(chan error, 1)
	t.Cleanup(func() { g.Stop(); <-served })
	go func() { served <- g.Serve(lis) }()
	_, bundle := dispatchertest.Issue(t, ca, "admin", pki.RoleAdmin)
	file := filepath.Join(t.TempDir(), "admin.pem")
	if err := os.WriteFile(file, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--server", lis.Addr().String(), "--credentials", file}
}

type fakeObjects struct {
	pb.UnimplementedObjectsServer
	known map[string]legion.Object
}

func (f fakeObjects) Get(_ context.Context, req *pb.GetRequest) (*pb.GetResponse, error) {
	o, ok := f.known[legion.Key(legion.Kind(req.Kind), req.Namespace, req.Name)]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "%s %s/%s not found", req.Kind, req.Namespace, req.Name)
	}
	p, err := pb.ToProto(o)
	if err != nil {
		return nil, err
	}
	return &pb.GetResponse{Object: p}, nil
}

// scriptedVolumes is the Volumes service as a test scripts it.
type scriptedVolumes struct {
	pb.UnimplementedVolumesServer
	backup  func(*pb.VolumeBackupRequest, grpc.ServerStreamingServer[pb.VolumeChunk]) error
	restore func(grpc.ClientStreamingServer[pb.VolumeChunk, pb.VolumeRestoreResponse]) error
}

func (s scriptedVolumes) Backup(req *pb.VolumeBackupRequest, stream grpc.ServerStreamingServer[pb.VolumeChunk]) error {
	return s.backup(req, stream)
}

func (s scriptedVolumes) Restore(stream grpc.ClientStreamingServer[pb.VolumeChunk, pb.VolumeRestoreResponse]) error {
	return s.restore(stream)
}

func backupServer(t *testing.T, script func(*pb.VolumeBackupRequest, grpc.ServerStreamingServer[pb.VolumeChunk]) error) []string {
	t.Helper()
	return fakeManager(t, scriptedVolumes{backup: script})
}

var backupData = bytes.Repeat([]byte("zfs send stream\x00\xff"), 40000)

func sendBackup(fail error) func(*pb.VolumeBackupRequest, grpc.ServerStreamingServer[pb.VolumeChunk]) error {
	return func(req *pb.VolumeBackupRequest, s grpc.ServerStreamingServer[pb.VolumeChunk]) error {
		h, _ := json.Marshal(legion.VolumeBackupHeader{Format: legion.VolumeBackupFormat, Namespace: req.Namespace, Name: req.Name,
			Labels: map[string]string{"app": "db"}, Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 30},
			Node: "w1", Backend: "zfs", Time: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Consistency: "crash"})
		if err := s.Send(&pb.VolumeChunk{Header: h}); err != nil {
			return err
		}
		half := len(backupData) / 2
		if err := s.Send(&pb.VolumeChunk{Data: backupData[:half]}); err != nil {
			return err
		}
		if fail != nil {
			return fail
		}
		return s.Send(&pb.VolumeChunk{Data: backupData[half:]})
	}
}

// A backup file is the header as one JSON line, then the stream, mode
// 0600; it takes its name only once whole.
func TestVolumeBackupWritesTheFileAtomically(t *testing.T) {
	t.Parallel()
	flags := backupServer(t, sendBackup(nil))
	dir := t.TempDir()
	file := filepath.Join(dir, "db.backup")
	out, err := runLegion(t, "", append([]string{"volume", "backup", "db", "-n", "shop", "-o", file}, flags...)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"volume shop/db backed up to " + file, "taken on w1", "crash-consistent", "power cut"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v %v", st, err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := bufio.NewReader(f)
	h, err := readBackupHeader(file, r)
	if err != nil || h.Namespace != "shop" || h.Name != "db" || h.Node != "w1" || h.Consistency != "crash" {
		t.Fatalf("header line: %+v %v", h, err)
	}
	var rest bytes.Buffer
	if _, err := rest.ReadFrom(r); err != nil || !bytes.Equal(rest.Bytes(), backupData) {
		t.Fatalf("after the header: %d bytes (%v), want the %d bytes streamed", rest.Len(), err, len(backupData))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want the file alone", len(entries))
	}

	// An existing file is kept unless --force.
	if _, err := runLegion(t, "", append([]string{"volume", "backup", "db", "-n", "shop", "-o", file}, flags...)...); err == nil ||
		!strings.Contains(err.Error(), "exists; pass --force") {
		t.Errorf("backup over an existing file: %v", err)
	}
	if _, err := runLegion(t, "", append([]string{"volume", "backup", "db", "-n", "shop", "-o", file, "--force"}, flags...)...); err != nil {
		t.Errorf("backup --force: %v", err)
	}
}

func TestVolumeBackupLeavesNoFileOnFailure(t *testing.T) {
	t.Parallel()
	flags := backupServer(t, sendBackup(errors.New("the node went away")))
	dir := t.TempDir()
	file := filepath.Join(dir, "db.backup")
	_, err := runLegion(t, "", append([]string{"volume", "backup", "db", "-n", "shop", "-o", file}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "the node went away") {
		t.Fatalf("a backup cut short: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a failed backup left %v", entries)
	}
}

// A file that does not start with a backup header is refused before
// anything is sent.
func TestVolumeRestoreRefusesAFileWithoutHeader(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	h, _ := json.Marshal(legion.VolumeBackupHeader{Format: "legion-volume-backup/9", Name: "db"})
	for name, tc := range map[string]struct{ content, want string }{
		"raw stream":   {"\x00\x01zfs stream without a header\n", "not a Legion volume backup (first line is not a JSON header"},
		"other json":   {`{"kind": "Volume"}` + "\n", "not a Legion volume backup"},
		"no line end":  {"abc", "not a Legion volume backup (no header line"},
		"empty":        {"", "not a Legion volume backup (no header line"},
		"later format": {string(h) + "\ndata", `backup format "legion-volume-backup/9"`},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
			t.Fatal(err)
		}
		// No server listens there: a refusal must come from the file.
		_, err := runLegion(t, "", "volume", "restore", file, "--node", "w2", "--server", "127.0.0.1:1", "--credentials", "/nonexistent")
		if err == nil || !strings.Contains(err.Error(), file+": "+tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	if _, err := runLegion(t, "", "volume", "restore", filepath.Join(dir, "empty")); err == nil || !strings.Contains(err.Error(), "--node NODE is required") {
		t.Errorf("restore without --node: %v", err)
	}
}

// A restore reads the header line, sends it with the target's namespace,
// name and node and the backup's labels and spec, then every byte after
// the line; it refuses a name a Volume has before sending anything, and
// passes on the server's refusal.
func TestVolumeRestoreSendsTheHeaderThenTheStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "db.backup")
	flags := backupServer(t, sendBackup(nil))
	if out, err := runLegion(t, "", append([]string{"volume", "backup", "db", "-n", "shop", "-o", file}, flags...)...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var (
		sent     legion.VolumeBackupHeader
		received bytes.Buffer
		restores int
	)
	vols := scriptedVolumes{restore: func(s grpc.ClientStreamingServer[pb.VolumeChunk, pb.VolumeRestoreResponse]) error {
		restores++
		first, err := s.Recv()
		if err != nil {
			return err
		}
		if len(first.Data) > 0 || json.Unmarshal(first.Header, &sent) != nil {
			return status.Error(codes.InvalidArgument, "the first message is not a header alone")
		}
		if sent.Name == "taken" {
			return status.Error(codes.AlreadyExists, "volume shop/taken was made meanwhile: the restored data is kept as legion-restore-taken on w2")
		}
		for {
			m, err := s.Recv()
			if err != nil {
				break
			}
			received.Write(m.Data)
		}
		v := &legion.Volume{Header: header(legion.KindVolume, sent.Namespace, sent.Name), Spec: sent.Spec,
			Status: legion.VolumeStatus{Node: sent.Node, Backend: "dir /var/legion/volumes/" + sent.Namespace + "/" + sent.Name}}
		v.Metadata.Labels = sent.Labels
		out, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return s.SendAndClose(&pb.VolumeRestoreResponse{Volume: out})
	}}
	w2 := &legion.Node{Header: header(legion.KindNode, "", "w2")}
	exists := &legion.Volume{Header: header(legion.KindVolume, "shop", "db")}
	flags = fakeManager(t, vols, w2, exists)
	restore := func(args ...string) (string, error) {
		return runLegion(t, "", append(append([]string{"volume", "restore", file}, args...), flags...)...)
	}

	out, err := restore("--node", "w2", "--name", "db2", "-n", "shop", "--dry-run")
	if err != nil || !strings.Contains(out, "volume shop/db2 would be restored onto w2") || restores != 0 {
		t.Fatalf("dry run: %v, %d restores\n%s", err, restores, out)
	}
	out, err = restore("--node", "w2", "--name", "db2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	want := legion.VolumeBackupHeader{Format: legion.VolumeBackupFormat, Namespace: "shop", Name: "db2",
		Labels: map[string]string{"app": "db"}, Spec: legion.VolumeSpec{Driver: legion.DriverZFS, Size: 1 << 30},
		Node: "w2", Backend: "zfs", Time: time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC), Consistency: "crash"}
	if diff := cmp.Diff(want, sent); diff != "" {
		t.Errorf("header sent (-want +got):\n%s", diff)
	}
	if !bytes.Equal(received.Bytes(), backupData) {
		t.Errorf("data sent: %d bytes, want the %d bytes after the header line", received.Len(), len(backupData))
	}
	for _, want := range []string{"volume shop/db2 restored onto w2 from " + file + ", backup of shop/db (taken on w1", "Labels:", "app=db", "Size:", "1Gi"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	restores = 0
	if _, err := restore("--node", "w2"); err == nil || !strings.Contains(err.Error(), "volume shop/db exists: a restore never replaces a Volume") || restores != 0 {
		t.Errorf("restore over an existing volume: %v (%d restores)", err, restores)
	}
	if _, err := restore("--node", "w9", "--name", "db3"); err == nil || !strings.Contains(err.Error(), "node w9: no such node") || restores != 0 {
		t.Errorf("restore onto an unknown node: %v (%d restores)", err, restores)
	}
	_, err = restore("--node", "w2", "--name", "taken")
	if err == nil || !strings.Contains(err.Error(), "volume shop/taken was made meanwhile: the restored data is kept as legion-restore-taken on w2") {
		t.Errorf("a restore the server refuses: %v", err)
	}
}

// A zfs Volume its node keeps as a plain directory (a process-platform
// node) is listed as one, as describe and backups say.
func TestVolumeDriverColumn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		driver  legion.VolumeDriver
		backend string
		want    string
	}{
		{legion.DriverZFS, "directory /var/legion/volumes/shop/db/data (size not enforced)", "zfs (a directory)"},
		{legion.DriverZFS, "zfs dataset zroot/legion/volumes/shop/db", "zfs"},
		{legion.DriverZFS, "", "zfs"},
		{legion.DriverNFS, "", "nfs"},
	} {
		v := &legion.Volume{Spec: legion.VolumeSpec{Driver: tc.driver}, Status: legion.VolumeStatus{Backend: tc.backend}}
		if got := volumeDriver(v); got != tc.want {
			t.Errorf("driver %s, backend %q: %q, want %q", tc.driver, tc.backend, got, tc.want)
		}
	}
}
