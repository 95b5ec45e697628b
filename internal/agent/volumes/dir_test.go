package volumes

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var shopDB = Ref{Namespace: "shop", Name: "db", UID: "00000000-0000-4000-8000-000000000010"}

// treeSum describes a tree entry by entry: type, mode, owner, mtime,
// link target and a content checksum, so two trees compare whole.
func treeSum(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := walk(root, func(e entry) error {
		line := fmt.Sprintf("%s %v %d:%d", e.rel, e.mode, e.uid, e.gid)
		if !e.mode.IsDir() {
			line += " " + e.mtime.UTC().Format(time.RFC3339Nano)
		}
		switch {
		case e.mode.IsRegular():
			b, err := os.ReadFile(filepath.Join(root, e.rel))
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %x", sha256.Sum256(b))
		case e.mode&fs.ModeSymlink != 0:
			line += " -> " + e.link
		}
		out = append(out, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

func write(t testing.TB, p, content string, mode fs.FileMode, uid, gid int) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// fillVolume writes files of several owners and modes, a symlink, a fifo
// and a nested directory with an odd mode.
func fillVolume(t testing.TB, data string) {
	t.Helper()
	write(t, filepath.Join(data, "pg/base/1"), "rows", 0o600, 1000, 1000)
	write(t, filepath.Join(data, "pg/PG_VERSION"), "16\n", 0o644, 1000, 1000)
	write(t, filepath.Join(data, "tool"), "#!/bin/sh\n", 0o4755|0o111, 0, 0)
	if err := os.Chmod(filepath.Join(data, "tool"), 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(data, "pg/base"), 0o700|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(data, "pg"), 1000, 1001); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pg/PG_VERSION", filepath.Join(data, "version")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(data, "pipe"), 0o620); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2020, 1, 2, 3, 4, 5, 678900000, time.UTC)
	if err := os.Chtimes(filepath.Join(data, "pg/PG_VERSION"), old, old); err != nil {
		t.Fatal(err)
	}
}

func ensure(t testing.TB, d *Dir, ref Ref, owner Owner) string {
	t.Helper()
	p, err := d.Ensure(context.Background(), ref, 1<<30, owner)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func ownerOf(t *testing.T, p string) (int, int, fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return int(st.Uid), int(st.Gid), fi.Mode()
}

func TestDirEnsureOwnsNewRootOnce(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("this test chowns files: run it as root")
	}
	d := NewDir(t.TempDir())
	cases := []struct {
		name  string
		owner Owner
		uid   int
		gid   int
		mode  fs.FileMode
	}{
		{"root", Owner{}, 0, 0, fs.ModeDir | 0o755},
		{"user", Owner{UID: 1000, GID: 1000}, 1000, 1000, fs.ModeDir | 0o755},
		{"fsgroup", Owner{UID: 1000, GID: 2000, GroupWritable: true}, 1000, 2000, fs.ModeDir | fs.ModeSetgid | 0o775},
	}
	for _, c := range cases {
		ref := Ref{Namespace: "shop", Name: c.name, UID: "uid-" + c.name}
		p := ensure(t, d, ref, c.owner)
		if want := filepath.Join(d.dataDir, "volumes", "shop", c.name, "data"); p != want {
			t.Errorf("%s: path %s, want %s", c.name, p, want)
		}
		uid, gid, mode := ownerOf(t, p)
		if uid != c.uid || gid != c.gid || mode != c.mode {
			t.Errorf("%s: root %d:%d %v, want %d:%d %v", c.name, uid, gid, mode, c.uid, c.gid, c.mode)
		}
		// Ensured again with another owner: the root is never re-owned.
		if p2 := ensure(t, d, ref, Owner{UID: 7, GID: 7}); p2 != p {
			t.Errorf("%s: second Ensure gave %s, want %s", c.name, p2, p)
		}
		if uid2, gid2, _ := ownerOf(t, p); uid2 != c.uid || gid2 != c.gid {
			t.Errorf("%s: re-owned to %d:%d by a second Ensure", c.name, uid2, gid2)
		}
	}
	if got := d.Describe("shop", "db"); !strings.Contains(got, "size not enforced") {
		t.Errorf("Describe = %q, want it to say the size is not enforced", got)
	}
}

func TestDirEnsureRefusesOtherVolume(t *testing.T) {
	t.Parallel()
	d := NewDir(t.TempDir())
	p := ensure(t, d, shopDB, Owner{})
	write(t, filepath.Join(p, "old"), "old data", 0o600, 0, 0)
	again := shopDB
	again.UID = "00000000-0000-4000-8000-000000000099"
	_, err := d.Ensure(context.Background(), again, 0, Owner{})
	if !errors.Is(err, ErrOtherVolume) {
		t.Fatalf("Ensure of a Volume made again under the name: %v, want ErrOtherVolume", err)
	}
	if _, err := d.Ensure(context.Background(), Ref{Namespace: "..", Name: "x", UID: "u"}, 0, Owner{}); err == nil {
		t.Error("Ensure accepted namespace \"..\"")
	}
	if _, err := d.Ensure(context.Background(), Ref{Namespace: "shop", Name: "a/b", UID: "u"}, 0, Owner{}); err == nil {
		t.Error("Ensure accepted name \"a/b\"")
	}
}

func TestDirSnapshotRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := NewDir(t.TempDir())
	data := ensure(t, d, shopDB, Owner{UID: 1000, GID: 1000})
	fillVolume(t, data)
	before := treeSum(t, data)
	if err := d.Snapshot(ctx, "shop", "db", "legion-update-3"); err != nil {
		t.Fatal(err)
	}
	if err := d.Snapshot(ctx, "shop", "db", "legion-update-3"); err != nil {
		t.Fatalf("snapshot taken again: %v, want nil", err)
	}
	// The failed version writes, deletes and adds.
	write(t, filepath.Join(data, "pg/base/1"), "corrupted", 0o600, 1000, 1000)
	if err := os.Remove(filepath.Join(data, "pg/PG_VERSION")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(data, "new"), "new", 0o644, 0, 0)
	if err := d.Snapshot(ctx, "shop", "db", "later"); err != nil {
		t.Fatal(err)
	}
	if err := d.Rollback(ctx, "shop", "db", "legion-update-3"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, treeSum(t, data)); diff != "" {
		t.Errorf("data after rollback differs from the snapshot (-want +got):\n%s", diff)
	}
	locals, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Local{{Ref: shopDB}}
	if diff := cmp.Diff(want, locals); diff != "" {
		t.Errorf("List after rollback: snapshot and the later one not dropped (-want +got):\n%s", diff)
	}
	if err := d.Rollback(ctx, "shop", "db", "legion-update-3"); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("rollback to a dropped snapshot: %v, want ErrNoSnapshot", err)
	}
}

func TestDirDropSnapshots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := NewDir(t.TempDir())
	ensure(t, d, shopDB, Owner{})
	for _, s := range []string{"legion-update-1", "legion-backup-5", "legion-update-2", "legion-update-3"} {
		if err := d.Snapshot(ctx, "shop", "db", s); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.DropSnapshots(ctx, "shop", "db", "legion-update-", "legion-update-3"); err != nil {
		t.Fatal(err)
	}
	locals, err := d.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Local{{Ref: shopDB, Snapshots: []string{"legion-backup-5", "legion-update-3"}}}
	if diff := cmp.Diff(want, locals); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	entries, err := os.ReadDir(filepath.Join(d.volDir("shop", "db"), snapshotsSub))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"legion-backup-5", "legion-update-3"}, names); diff != "" {
		t.Errorf("snapshot copies left (-want +got):\n%s", diff)
	}
	if err := d.DropSnapshots(ctx, "shop", "gone", "legion-", ""); err != nil {
		t.Errorf("DropSnapshots of a missing volume: %v, want nil", err)
	}
}

// pipeSend runs Send into Receive through an io.Pipe, as a migration
// does between two agents.
func pipeSend(t testing.TB, from *Dir, to *Dir, ref Ref, snap, fromSnap string, incremental bool) {
	t.Helper()
	ctx := context.Background()
	pr, pw := io.Pipe()
	sent := make(chan error, 1)
	go func() {
		err := from.Send(ctx, ref.Namespace, ref.Name, snap, fromSnap, pw)
		pw.CloseWithError(err)
		sent <- err
	}()
	rerr := to.Receive(ctx, ref, 1<<30, incremental, pr)
	pr.CloseWithError(rerr)
	if err := <-sent; err != nil {
		t.Fatalf("send: %v", err)
	}
	if rerr != nil {
		t.Fatalf("receive: %v", rerr)
	}
}

func TestDirSendReceiveFullAndIncremental(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := NewDir(t.TempDir()), NewDir(t.TempDir())
	data := ensure(t, src, shopDB, Owner{UID: 1000, GID: 1000, GroupWritable: true})
	fillVolume(t, data)
	pipeSend(t, src, dst, shopDB, "move-full", "", false)
	got := filepath.Join(dst.volDir("shop", "db"), dataSub)
	if diff := cmp.Diff(treeSum(t, data), treeSum(t, got)); diff != "" {
		t.Fatalf("received full copy differs (-sent +received):\n%s", diff)
	}

	// Changes while the task ran on: a file rewritten, one deleted, a
	// directory deleted, a file turned into a directory, new files.
	write(t, filepath.Join(data, "pg/base/1"), "rows and more rows", 0o600, 1000, 1000)
	if err := os.Remove(filepath.Join(data, "pg/PG_VERSION")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(data, "tool")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(data, "tool/inside"), "now a dir", 0o640, 1000, 0)
	write(t, filepath.Join(data, "wal/000001"), "log", 0o600, 1000, 1000)
	if err := os.RemoveAll(filepath.Join(data, "pg/base")); err != nil {
		t.Fatal(err)
	}
	pipeSend(t, src, dst, shopDB, "move-last", "move-full", true)
	if diff := cmp.Diff(treeSum(t, data), treeSum(t, got)); diff != "" {
		t.Fatalf("after the incremental the copy differs (-sent +received):\n%s", diff)
	}
	// The last part sent again is taken on and changes nothing.
	pipeSend(t, src, dst, shopDB, "move-last", "move-full", true)
	if diff := cmp.Diff(treeSum(t, data), treeSum(t, got)); diff != "" {
		t.Fatalf("after the incremental sent again the copy differs (-sent +received):\n%s", diff)
	}
	locals, err := dst.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Local{{Ref: shopDB, Snapshots: []string{"move-full", "move-last"}}}
	if diff := cmp.Diff(want, locals); diff != "" {
		t.Errorf("receiver's List (-want +got):\n%s", diff)
	}
	// Once used there, the migration's snapshots go.
	if err := dst.DropSnapshots(ctx, "shop", "db", "move-", ""); err != nil {
		t.Fatal(err)
	}
	if p, err := dst.Ensure(ctx, shopDB, 1<<30, Owner{}); err != nil || p != got {
		t.Fatalf("Ensure on the receiver: %q, %v; want %q", p, err, got)
	}
}

// failingReader gives n bytes of r, then an error, as a stream cut by a
// lost manager does.
type failingReader struct {
	r io.Reader
	n int64
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("stream cut")
	}
	if int64(len(p)) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= int64(n)
	return n, err
}

// sendTo writes a whole stream into memory.
func sendTo(t *testing.T, d *Dir, snap, from string) []byte {
	t.Helper()
	var b strings.Builder
	if err := d.Send(context.Background(), "shop", "db", snap, from, &b); err != nil {
		t.Fatal(err)
	}
	return []byte(b.String())
}

func TestDirReceiveCutShortLeavesNoPartCopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := NewDir(t.TempDir())
	data := ensure(t, src, shopDB, Owner{})
	fillVolume(t, data)
	write(t, filepath.Join(data, "big"), strings.Repeat("x", 3<<20), 0o644, 0, 0)
	full := sendTo(t, src, "full", "")

	// Cut midway, at several points, including the exact end of the tar
	// entries before the end record (a clean EOF to tar).
	for _, cut := range []int64{0, 100, int64(len(full) / 2), int64(len(full) - 2048)} {
		dst := NewDir(t.TempDir())
		err := dst.Receive(ctx, shopDB, 0, false, &failingReader{r: strings.NewReader(string(full)), n: cut})
		if err == nil {
			t.Fatalf("cut at %d: receive succeeded", cut)
		}
		locals, lerr := dst.List(ctx)
		if lerr != nil || len(locals) != 0 {
			t.Errorf("cut at %d: List = %v, %v; want no volume", cut, locals, lerr)
		}
		left, _ := os.ReadDir(dst.nsDir("shop"))
		if len(left) != 0 {
			t.Errorf("cut at %d: left %d entries under the namespace, want none", cut, len(left))
		}
	}
	truncated := full[:len(full)-2048] // no end record (one header, one data block) nor trailer: tar ends cleanly
	dst := NewDir(t.TempDir())
	if err := dst.Receive(ctx, shopDB, 0, false, strings.NewReader(string(truncated))); !strings.Contains(fmt.Sprint(err), "cut short") {
		t.Errorf("stream without its end record: %v, want a cut-short error", err)
	}

	// An incremental cut short leaves the full copy as it was.
	dst = NewDir(t.TempDir())
	if err := dst.Receive(ctx, shopDB, 0, false, strings.NewReader(string(full))); err != nil {
		t.Fatal(err)
	}
	got := filepath.Join(dst.volDir("shop", "db"), dataSub)
	before := treeSum(t, got)
	write(t, filepath.Join(data, "big"), strings.Repeat("y", 3<<20), 0o644, 0, 0)
	if err := os.Remove(filepath.Join(data, "tool")); err != nil {
		t.Fatal(err)
	}
	inc := sendTo(t, src, "last", "full")
	err := dst.Receive(ctx, shopDB, 0, true, &failingReader{r: strings.NewReader(string(inc)), n: int64(len(inc) / 2)})
	if err == nil {
		t.Fatal("cut incremental: receive succeeded")
	}
	if diff := cmp.Diff(before, treeSum(t, got)); diff != "" {
		t.Errorf("a cut incremental changed the full copy (-before +after):\n%s", diff)
	}
	entries, _ := os.ReadDir(dst.volDir("shop", "db"))
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			t.Errorf("work directory %s left behind", e.Name())
		}
	}
}

func TestDirRestoreRefusesExisting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := NewDir(t.TempDir()), NewDir(t.TempDir())
	fillVolume(t, ensure(t, src, shopDB, Owner{}))
	stream := sendTo(t, src, "legion-backup-1", "")
	kept := ensure(t, dst, shopDB, Owner{})
	write(t, filepath.Join(kept, "mine"), "keep me", 0o600, 0, 0)
	err := dst.Restore(ctx, shopDB, 0, strings.NewReader(string(stream)))
	if !errors.Is(err, ErrExists) {
		t.Fatalf("Restore over data of that name: %v, want ErrExists", err)
	}
	if b, err := os.ReadFile(filepath.Join(kept, "mine")); err != nil || string(b) != "keep me" {
		t.Errorf("existing data touched by a refused restore: %q, %v", b, err)
	}
	other := Ref{Namespace: "shop", Name: "db-copy", UID: "u2"}
	if err := dst.Restore(ctx, other, 0, strings.NewReader(string(stream))); err != nil {
		t.Fatalf("Restore under a new name: %v", err)
	}
	if diff := cmp.Diff(treeSum(t, filepath.Join(src.volDir("shop", "db"), snapshotsSub, "legion-backup-1")),
		treeSum(t, filepath.Join(dst.volDir("shop", "db-copy"), dataSub))); diff != "" {
		t.Errorf("restored data differs (-backup +restored):\n%s", diff)
	}
}

func TestDirDestroy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := NewDir(t.TempDir())
	fillVolume(t, ensure(t, d, shopDB, Owner{}))
	if err := d.Snapshot(ctx, "shop", "db", "s1"); err != nil {
		t.Fatal(err)
	}
	if err := d.Destroy(ctx, "shop", "db"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(d.volDir("shop", "db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("volume directory still there: %v", err)
	}
	left, _ := os.ReadDir(d.nsDir("shop"))
	if len(left) != 0 {
		t.Errorf("left %d entries under the namespace, want none", len(left))
	}
	if err := d.Destroy(ctx, "shop", "db"); err != nil {
		t.Errorf("Destroy of a missing volume: %v, want nil", err)
	}
	// Made again under the name, it starts empty.
	p := ensure(t, d, Ref{Namespace: "shop", Name: "db", UID: "new"}, Owner{})
	if entries, _ := os.ReadDir(p); len(entries) != 0 {
		t.Errorf("a volume made again holds %d old entries", len(entries))
	}
}

func TestDirStreamRefusesEscapes(t *testing.T) {
	t.Parallel()
	// A hand-made stream writing through a symlink it made.
	src := NewDir(t.TempDir())
	data := ensure(t, src, shopDB, Owner{})
	if err := os.Symlink("/", filepath.Join(data, "up")); err != nil {
		t.Fatal(err)
	}
	stream := string(sendTo(t, src, "s", ""))
	dst := NewDir(t.TempDir())
	if err := dst.Receive(context.Background(), shopDB, 0, false, strings.NewReader(stream)); err != nil {
		t.Fatalf("a stream with a symlink: %v", err)
	}
	x := &extractor{root: t.TempDir()}
	dirs := map[string]bool{".": true}
	for _, name := range []string{"data/up/etc/passwd", "data/../x", "other/x", "data/nodir/x"} {
		if _, err := x.entryOf(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644}, dirs); err == nil {
			t.Errorf("entry %q accepted", name)
		}
	}
}

// A copy restored before its Volume was made is taken by the Volume's
// first use, and then refuses any other uid.
func TestDirRestoredCopyTakesTheVolumesUID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := NewDir(t.TempDir()), NewDir(t.TempDir())
	fillVolume(t, ensure(t, src, shopDB, Owner{}))
	stream := sendTo(t, src, "legion-backup-1", "")
	if err := dst.Restore(ctx, Ref{Namespace: "shop", Name: "db"}, 0, strings.NewReader(string(stream))); err != nil {
		t.Fatal(err)
	}
	p := ensure(t, dst, shopDB, Owner{})
	if diff := cmp.Diff(treeSum(t, filepath.Join(src.volDir("shop", "db"), snapshotsSub, "legion-backup-1")), treeSum(t, p)); diff != "" {
		t.Errorf("the restored copy's data (-backup +used):\n%s", diff)
	}
	if _, err := dst.Ensure(ctx, Ref{Namespace: "shop", Name: "db", UID: "someone-else"}, 0, Owner{}); !errors.Is(err, ErrOtherVolume) {
		t.Fatalf("another uid after the first use: %v, want ErrOtherVolume", err)
	}
}

// A migration's snapshots are sent from the live data: no copy of the
// volume is made on the sending node, only a manifest of what went, and
// the last part, from that manifest, makes the receiver's copy equal.
func TestDirMoveSendsLiveDataWithAManifest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src, dst := NewDir(t.TempDir()), NewDir(t.TempDir())
	data := ensure(t, src, shopDB, Owner{UID: 1000, GID: 1000})
	fillVolume(t, data)
	full, last := MoveSnapshotPrefix+"7-full", MoveSnapshotPrefix+"7-last"
	pipeSend(t, src, dst, shopDB, full, "", false)
	vdir := src.volDir("shop", "db")
	if _, err := os.Stat(filepath.Join(vdir, snapshotsSub, full)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the sending node copied the volume for the move: %v", err)
	}
	if _, err := os.Stat(manifestPath(vdir, full)); err != nil {
		t.Fatalf("no manifest of what was sent: %v", err)
	}
	got := filepath.Join(dst.volDir("shop", "db"), dataSub)
	write(t, filepath.Join(data, "pg/base/1"), "rows written after the full copy", 0o600, 1000, 1000)
	if err := os.Remove(filepath.Join(data, "pg/PG_VERSION")); err != nil {
		t.Fatal(err)
	}
	pipeSend(t, src, dst, shopDB, last, full, true)
	if diff := cmp.Diff(treeSum(t, data), treeSum(t, got)); diff != "" {
		t.Fatalf("after the last part the copy differs (-sent +received):\n%s", diff)
	}
	if err := src.Rollback(ctx, "shop", "db", full); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("rollback to a manifest: %v, want ErrNoSnapshot", err)
	}
	if err := src.DropSnapshots(ctx, "shop", "db", MoveSnapshotPrefix, ""); err != nil {
		t.Fatal(err)
	}
	locals, err := src.List(ctx)
	if err != nil || len(locals) != 1 || len(locals[0].Snapshots) != 0 {
		t.Fatalf("after dropping the move's snapshots: %+v %v", locals, err)
	}
	if _, err := os.Stat(manifestPath(vdir, full)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the manifest outlived its snapshot: %v", err)
	}
}
