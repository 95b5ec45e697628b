package volumes

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
)

const ds = "zroot/legion/volumes/shop/db"

// FreeBSD's answers (libzfs's texts) for the cases the store handles.
var (
	noDataset = sys.Answer{Code: 1, Stderr: "cannot open '" + ds + "': dataset does not exist\n"}
	noSnap    = func(s string) sys.Answer {
		return sys.Answer{Code: 1, Stderr: "cannot open '" + ds + "@" + s + "': dataset does not exist\n"}
	}
	snapExists = func(s string) sys.Answer {
		return sys.Answer{Code: 1, Stderr: "cannot create snapshot '" + ds + "@" + s + "': dataset already exists\n"}
	}
	cutReceive  = sys.Answer{Code: 1, Stderr: "cannot receive: failed to read from stream\n"}
	destExists  = sys.Answer{Code: 1, Stderr: "cannot receive new filesystem stream: destination '" + ds + "' exists\nmust specify -F to overwrite it\n"}
	noIncSource = sys.Answer{Code: 1, Stderr: "warning: cannot send '" + ds + "@last': incremental source (" + ds + "@full) does not exist\n"}
)

func newZFS(f *sys.Fake) *ZFS { return NewZFS(f, "zroot/legion") }

func checkLines(t *testing.T, f *sys.Fake, want []string) {
	t.Helper()
	if diff := cmp.Diff(want, f.Lines()); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

func TestZFSEnsureMakesDataset(t *testing.T) {
	t.Parallel()
	mp := t.TempDir()
	f := sys.NewFake().
		On("zfs get -H -p -o value legion:uid", noDataset).
		On("zfs get -H -p -o value mounted", sys.Answer{Stdout: "yes\n"}).
		On("zfs get -H -p -o value mountpoint", sys.Answer{Stdout: mp + "\n"})
	p, err := newZFS(f).Ensure(context.Background(), shopDB, 1<<30, Owner{UID: 1000, GID: 2000, GroupWritable: true})
	if err != nil {
		t.Fatal(err)
	}
	if p != mp {
		t.Errorf("path %s, want the mountpoint %s", p, mp)
	}
	checkLines(t, f, []string{
		"zfs get -H -p -o value legion:uid " + ds,
		"zfs create -p -o legion:uid=" + shopDB.UID + " -o quota=1073741824 " + ds,
		"zfs get -H -p -o value mounted " + ds,
		"zfs get -H -p -o value mountpoint " + ds,
	})
	uid, gid, mode := ownerOf(t, mp)
	if uid != 1000 || gid != 2000 || mode != os.ModeDir|os.ModeSetgid|0o775 {
		t.Errorf("new root %d:%d %v, want 1000:2000 dgrwxrwxr-x", uid, gid, mode)
	}
	if got := newZFS(f).Describe("shop", "db"); got != "zfs dataset "+ds {
		t.Errorf("Describe = %q", got)
	}
}

func TestZFSEnsureExisting(t *testing.T) {
	t.Parallel()
	mp := t.TempDir()
	// A copy received with -u is mounted at its first use; its root is
	// never re-owned; no quota when the size is 0 (zfs prints 0 for none).
	f := sys.NewFake().
		On("zfs get -H -p -o value legion:uid", sys.Answer{Stdout: shopDB.UID + "\n"}).
		On("zfs get -H -p -o value quota", sys.Answer{Stdout: "0\n"}).
		On("zfs get -H -p -o value mounted", sys.Answer{Stdout: "no\n"}).
		On("zfs get -H -p -o value mountpoint", sys.Answer{Stdout: mp + "\n"})
	if _, err := newZFS(f).Ensure(context.Background(), shopDB, 0, Owner{UID: 1000, GID: 1000}); err != nil {
		t.Fatal(err)
	}
	checkLines(t, f, []string{
		"zfs get -H -p -o value legion:uid " + ds,
		"zfs get -H -p -o value quota " + ds,
		"zfs get -H -p -o value mounted " + ds,
		"zfs mount " + ds,
		"zfs get -H -p -o value mountpoint " + ds,
	})
	if uid, _, _ := ownerOf(t, mp); uid != 0 {
		t.Errorf("existing root re-owned to %d", uid)
	}

	other := sys.NewFake().On("zfs get -H -p -o value legion:uid", sys.Answer{Stdout: "00000000-0000-4000-8000-0000000000aa\n"})
	_, err := newZFS(other).Ensure(context.Background(), shopDB, 0, Owner{})
	if !errors.Is(err, ErrOtherVolume) {
		t.Fatalf("dataset of another uid: %v, want ErrOtherVolume", err)
	}
	checkLines(t, other, []string{"zfs get -H -p -o value legion:uid " + ds})

	fresh := sys.NewFake().
		On("zfs get -H -p -o value legion:uid", noDataset).
		On("zfs get -H -p -o value mounted", sys.Answer{Stdout: "yes\n"}).
		On("zfs get -H -p -o value mountpoint", sys.Answer{Stdout: mp + "\n"})
	if _, err := newZFS(fresh).Ensure(context.Background(), shopDB, 0, Owner{}); err != nil {
		t.Fatal(err)
	}
	if got := fresh.Lines()[1]; got != "zfs create -p -o legion:uid="+shopDB.UID+" "+ds {
		t.Errorf("create without a size: %q, want no quota", got)
	}
}

// An existing dataset's quota follows the Volume's size: grown or shrunk
// with zfs set, left alone when equal, dropped (none) when the size is,
// and never set below what the dataset uses.
func TestZFSEnsureResizes(t *testing.T) {
	t.Parallel()
	mp := t.TempDir()
	ensure := func(quota, used string, size int64) (*sys.Fake, error) {
		f := sys.NewFake().
			On("zfs get -H -p -o value legion:uid", sys.Answer{Stdout: shopDB.UID + "\n"}).
			On("zfs get -H -p -o value quota", sys.Answer{Stdout: quota + "\n"}).
			On("zfs get -H -p -o value used", sys.Answer{Stdout: used + "\n"}).
			On("zfs get -H -p -o value mounted", sys.Answer{Stdout: "yes\n"}).
			On("zfs get -H -p -o value mountpoint", sys.Answer{Stdout: mp + "\n"})
		_, err := newZFS(f).Ensure(context.Background(), shopDB, size, Owner{})
		return f, err
	}
	const got, quota, used = "zfs get -H -p -o value legion:uid " + ds, "zfs get -H -p -o value quota " + ds, "zfs get -H -p -o value used " + ds
	const mounted, mountpoint = "zfs get -H -p -o value mounted " + ds, "zfs get -H -p -o value mountpoint " + ds
	cases := []struct {
		name        string
		quota, used string
		size        int64
		want        []string
	}{
		{"grown", "1073741824", "52428800", 2 << 30,
			[]string{got, quota, used, "zfs set quota=2147483648 " + ds, mounted, mountpoint}},
		{"shrunk above what it uses", "2147483648", "52428800", 1 << 30,
			[]string{got, quota, used, "zfs set quota=1073741824 " + ds, mounted, mountpoint}},
		{"given a size", "0", "52428800", 1 << 30,
			[]string{got, quota, used, "zfs set quota=1073741824 " + ds, mounted, mountpoint}},
		{"size dropped", "1073741824", "52428800", 0,
			[]string{got, quota, "zfs set quota=none " + ds, mounted, mountpoint}},
		{"unchanged", "1073741824", "52428800", 1 << 30,
			[]string{got, quota, mounted, mountpoint}},
	}
	for _, c := range cases {
		f, err := ensure(c.quota, c.used, c.size)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if diff := cmp.Diff(c.want, f.Lines()); diff != "" {
			t.Errorf("%s: commands (-want +got):\n%s", c.name, diff)
		}
	}

	// Below what it uses: refused before anything is set or mounted.
	f, err := ensure("2147483648", "1610612736", 1<<30)
	want := "volume shop/db: size 1073741824 bytes is below the 1610612736 bytes its dataset " + ds + " already uses: not resized"
	if err == nil || err.Error() != want {
		t.Fatalf("shrunk below what it uses: %v, want %q", err, want)
	}
	checkLines(t, f, []string{got, quota, used})

	// A quota zfs printed in another form is not taken for a size.
	if _, err := ensure("1G", "0", 1<<30); err == nil || !strings.Contains(err.Error(), `quota is "1G", expected a number of bytes`) {
		t.Errorf("unparsable quota: %v", err)
	}
}

// Resize sets the quota of a Volume's dataset in use, as Ensure does; it
// makes no dataset, and touches none of another Volume of the name.
func TestZFSResize(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().
		On("zfs get -H -p -o value legion:uid", sys.Answer{Stdout: shopDB.UID + "\n"}).
		On("zfs get -H -p -o value quota", sys.Answer{Stdout: "1073741824\n"}).
		On("zfs get -H -p -o value used", sys.Answer{Stdout: "52428800\n"})
	if err := newZFS(f).Resize(ctx, shopDB, 2<<30); err != nil {
		t.Fatal(err)
	}
	checkLines(t, f, []string{"zfs get -H -p -o value legion:uid " + ds, "zfs get -H -p -o value quota " + ds,
		"zfs get -H -p -o value used " + ds, "zfs set quota=2147483648 " + ds})

	f = sys.NewFake().On("zfs get -H -p -o value legion:uid", noDataset)
	if err := newZFS(f).Resize(ctx, shopDB, 2<<30); !errors.Is(err, ErrNoVolume) {
		t.Errorf("no dataset: %v, want ErrNoVolume", err)
	}
	checkLines(t, f, []string{"zfs get -H -p -o value legion:uid " + ds})

	f = sys.NewFake().On("zfs get -H -p -o value legion:uid", sys.Answer{Stdout: "another-uid\n"})
	if err := newZFS(f).Resize(ctx, shopDB, 2<<30); !errors.Is(err, ErrOtherVolume) {
		t.Errorf("another Volume's dataset: %v, want ErrOtherVolume", err)
	}
	checkLines(t, f, []string{"zfs get -H -p -o value legion:uid " + ds})
}

func TestZFSSnapshotsAndRollback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().
		On("zfs snapshot "+ds+"@legion-update-3", snapExists("legion-update-3")).
		On("zfs rollback -r "+ds+"@gone", noSnap("gone")).
		On("zfs list -H -p -o name -t snapshot", sys.Answer{Stdout: ds + "@legion-update-1\n" + ds + "@legion-backup-9\n" + ds + "@legion-update-2\n"})
	z := newZFS(f)
	if err := z.Snapshot(ctx, "shop", "db", "legion-update-3"); err != nil {
		t.Errorf("snapshot that exists: %v, want nil", err)
	}
	if err := z.Rollback(ctx, "shop", "db", "legion-update-2"); err != nil {
		t.Fatal(err)
	}
	if err := z.Rollback(ctx, "shop", "db", "gone"); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("rollback to a missing snapshot: %v, want ErrNoSnapshot", err)
	}
	if err := z.DropSnapshots(ctx, "shop", "db", "legion-update-", "legion-update-2"); err != nil {
		t.Fatal(err)
	}
	checkLines(t, f, []string{
		"zfs snapshot " + ds + "@legion-update-3",
		"zfs rollback -r " + ds + "@legion-update-2",
		"zfs destroy " + ds + "@legion-update-2",
		"zfs rollback -r " + ds + "@gone",
		"zfs list -H -p -o name -t snapshot -s createtxg -d 1 " + ds,
		"zfs destroy " + ds + "@legion-update-1",
	})

	missing := sys.NewFake().On("zfs list", noDataset).On("zfs destroy", noDataset).On("zfs snapshot", noDataset)
	z = newZFS(missing)
	if err := z.DropSnapshots(ctx, "shop", "db", "legion-", ""); err != nil {
		t.Errorf("DropSnapshots of a missing dataset: %v, want nil", err)
	}
	if err := z.Destroy(ctx, "shop", "db"); err != nil {
		t.Errorf("Destroy of a missing dataset: %v, want nil", err)
	}
	if err := z.Snapshot(ctx, "shop", "db", "s"); !errors.Is(err, ErrNoVolume) {
		t.Errorf("Snapshot of a missing dataset: %v, want ErrNoVolume", err)
	}
	checkLines(t, missing, []string{
		"zfs list -H -p -o name -t snapshot -s createtxg -d 1 " + ds,
		"zfs destroy -r " + ds,
		"zfs snapshot " + ds + "@s",
	})
}

func TestZFSSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().
		On("zfs send -i @full "+ds+"@last", sys.Answer{Stdout: "STREAM-BYTES"}).
		On("zfs send -i @full "+ds+"@again", noIncSource)
	z := newZFS(f)
	var w bytes.Buffer
	if err := z.Send(ctx, "shop", "db", "last", "full", &w); err != nil {
		t.Fatal(err)
	}
	if w.String() != "STREAM-BYTES" {
		t.Errorf("stream %q, want the command's output", w.String())
	}
	if err := z.Send(ctx, "shop", "db", "again", "full", io.Discard); !errors.Is(err, ErrNoSnapshot) {
		t.Errorf("send from a missing source: %v, want ErrNoSnapshot", err)
	}
	if err := z.Send(ctx, "shop", "db", "full", "", io.Discard); err != nil {
		t.Fatal(err)
	}
	checkLines(t, f, []string{
		"zfs snapshot " + ds + "@last",
		"zfs send -i @full " + ds + "@last",
		"zfs snapshot " + ds + "@again",
		"zfs send -i @full " + ds + "@again",
		"zfs snapshot " + ds + "@full",
		"zfs send " + ds + "@full",
	})
}

func TestZFSReceive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().On("zfs destroy -r "+ds, noDataset)
	z := newZFS(f)
	if err := z.Receive(ctx, shopDB, 1<<20, false, strings.NewReader("FULL")); err != nil {
		t.Fatal(err)
	}
	checkLines(t, f, []string{
		"zfs destroy -r " + ds, // a stale copy is replaced
		"zfs create -p zroot/legion/volumes/shop",
		"zfs receive -u -o legion:uid=" + shopDB.UID + " -o quota=1048576 " + ds,
	})
	if got := string(f.Calls()[2].Stdin); got != "FULL" {
		t.Errorf("receive read %q, want the stream", got)
	}

	// Incremental: onto the full copy of this Volume, -F so a last part
	// received before is rolled back and taken on again.
	inc := sys.NewFake().On("zfs get -H -p -o value legion:uid", sys.Answer{Stdout: shopDB.UID + "\n"})
	if err := newZFS(inc).Receive(ctx, shopDB, 0, true, strings.NewReader("INC")); err != nil {
		t.Fatal(err)
	}
	checkLines(t, inc, []string{
		"zfs get -H -p -o value legion:uid " + ds,
		"zfs receive -u -F " + ds,
	})
	none := sys.NewFake().On("zfs get", noDataset)
	if err := newZFS(none).Receive(ctx, shopDB, 0, true, strings.NewReader("INC")); !errors.Is(err, ErrNoVolume) {
		t.Errorf("incremental without the full copy: %v, want ErrNoVolume", err)
	}
	checkLines(t, none, []string{"zfs get -H -p -o value legion:uid " + ds})
}

func TestZFSReceiveCutShortDropsPartCopy(t *testing.T) {
	t.Parallel()
	f := sys.NewFake().On("zfs receive", cutReceive)
	cut := &failingReader{r: strings.NewReader("FULL STREAM"), n: 4}
	err := newZFS(f).Receive(context.Background(), shopDB, 0, false, cut)
	if err == nil || !strings.Contains(err.Error(), "failed to read from stream") {
		t.Fatalf("cut receive: %v, want zfs's answer", err)
	}
	checkLines(t, f, []string{
		"zfs destroy -r " + ds,
		"zfs create -p zroot/legion/volumes/shop",
		"zfs receive -u -o legion:uid=" + shopDB.UID + " " + ds,
		"zfs destroy -r " + ds, // whatever the failed receive left
	})
	// A cut incremental keeps the full copy: nothing is destroyed.
	inc := sys.NewFake().
		On("zfs get -H -p -o value legion:uid", sys.Answer{Stdout: shopDB.UID + "\n"}).
		On("zfs receive", cutReceive)
	if err := newZFS(inc).Receive(context.Background(), shopDB, 0, true, strings.NewReader("x")); err == nil {
		t.Fatal("cut incremental: receive succeeded")
	}
	for _, l := range inc.Lines() {
		if strings.HasPrefix(l, "zfs destroy") {
			t.Errorf("a cut incremental ran %q", l)
		}
	}
}

func TestZFSRestoreNeverReplaces(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().On("zfs list -H -o name -t filesystem "+ds, sys.Answer{Stdout: ds + "\n"})
	if err := newZFS(f).Restore(ctx, shopDB, 0, strings.NewReader("B")); !errors.Is(err, ErrExists) {
		t.Fatalf("restore over an existing dataset: %v, want ErrExists", err)
	}
	checkLines(t, f, []string{"zfs list -H -o name -t filesystem " + ds})

	// Made meanwhile: zfs refuses the full stream, and the dataset, not
	// ours, is left alone.
	race := sys.NewFake().On("zfs list", noDataset).On("zfs receive", destExists)
	if err := newZFS(race).Restore(ctx, shopDB, 0, strings.NewReader("B")); !errors.Is(err, ErrExists) {
		t.Fatalf("restore racing a new dataset: %v, want ErrExists", err)
	}
	checkLines(t, race, []string{
		"zfs list -H -o name -t filesystem " + ds,
		"zfs create -p zroot/legion/volumes/shop",
		"zfs receive -u -o legion:uid=" + shopDB.UID + " " + ds,
	})
}

func TestZFSList(t *testing.T) {
	t.Parallel()
	out := strings.Join([]string{
		"zroot/legion/volumes\t-",
		"zroot/legion/volumes/shop\t-",
		ds + "\t" + shopDB.UID,
		"zroot/legion/volumes/shop/cache\t-", // not made by Legion
		ds + "@move-full\t-",
		"zroot/legion/volumes/web/files\tuid-2",
		ds + "@move-last\t-",
	}, "\n") + "\n"
	f := sys.NewFake().On("zfs list", sys.Answer{Stdout: out})
	got, err := newZFS(f).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []Local{
		{Ref: shopDB, Snapshots: []string{"move-full", "move-last"}},
		{Ref: Ref{Namespace: "web", Name: "files", UID: "uid-2"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
	checkLines(t, f, []string{"zfs list -H -p -r -d 3 -t filesystem,snapshot -s createtxg -o name,legion:uid zroot/legion/volumes"})

	none := sys.NewFake().On("zfs list", sys.Answer{Code: 1, Stderr: "cannot open 'zroot/legion/volumes': dataset does not exist\n"})
	if got, err := newZFS(none).List(context.Background()); err != nil || len(got) != 0 {
		t.Errorf("List without the volumes dataset: %v, %v; want none", got, err)
	}
}

// A copy restored before its Volume was made carries the restored mark,
// and the Volume's first use gives the dataset its uid.
func TestZFSRestoredCopyTakesTheVolumesUID(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := sys.NewFake().On("zfs list", noDataset)
	if err := newZFS(f).Restore(ctx, Ref{Namespace: "shop", Name: "db"}, 0, strings.NewReader("B")); err != nil {
		t.Fatal(err)
	}
	checkLines(t, f, []string{
		"zfs list -H -o name -t filesystem " + ds,
		"zfs create -p zroot/legion/volumes/shop",
		"zfs receive -u -o legion:uid=" + RestoredUID + " " + ds,
	})
	mp := t.TempDir()
	use := sys.NewFake().
		On("zfs get -H -p -o value legion:uid", sys.Answer{Stdout: RestoredUID + "\n"}).
		On("zfs get -H -p -o value quota", sys.Answer{Stdout: "0\n"}).
		On("zfs get -H -p -o value mounted", sys.Answer{Stdout: "no\n"}).
		On("zfs get -H -p -o value mountpoint", sys.Answer{Stdout: mp + "\n"})
	if _, err := newZFS(use).Ensure(ctx, shopDB, 0, Owner{}); err != nil {
		t.Fatal(err)
	}
	checkLines(t, use, []string{
		"zfs get -H -p -o value legion:uid " + ds,
		"zfs set legion:uid=" + shopDB.UID + " " + ds,
		"zfs get -H -p -o value quota " + ds,
		"zfs get -H -p -o value mounted " + ds,
		"zfs mount " + ds,
		"zfs get -H -p -o value mountpoint " + ds,
	})
}
