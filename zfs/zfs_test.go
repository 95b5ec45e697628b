package zfs

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/sys"
)

func TestCommandLines(t *testing.T) {
	ctx := context.Background()
	f := sys.NewFake()
	f.On("zfs get -H -p -o value mountpoint tank/a", sys.Answer{Stdout: "/tank/a\n"})
	z := New(f)
	if err := z.Create(ctx, "tank/legion/images", map[string]string{"mountpoint": "/x", "compression": "lz4"}); err != nil {
		t.Fatal(err)
	}
	if err := z.Clone(ctx, "tank/images/a@layer", "tank/images/b", nil); err != nil {
		t.Fatal(err)
	}
	if err := z.Snapshot(ctx, "tank/images/b@layer"); err != nil {
		t.Fatal(err)
	}
	if err := z.Destroy(ctx, "tank/images/b", true); err != nil {
		t.Fatal(err)
	}
	if err := z.Destroy(ctx, "tank/images/b@layer", false); err != nil {
		t.Fatal(err)
	}
	if err := z.Set(ctx, "tank/v", "quota", "1073741824"); err != nil {
		t.Fatal(err)
	}
	mp, err := z.Mountpoint(ctx, "tank/a")
	if err != nil || mp != "/tank/a" {
		t.Fatalf("Mountpoint = %q, %v; want /tank/a", mp, err)
	}
	want := []string{
		"zfs create -p -o compression=lz4 -o mountpoint=/x tank/legion/images",
		"zfs clone tank/images/a@layer tank/images/b",
		"zfs snapshot tank/images/b@layer",
		"zfs destroy -r tank/images/b",
		"zfs destroy tank/images/b@layer",
		"zfs set quota=1073741824 tank/v",
		"zfs get -H -p -o value mountpoint tank/a",
	}
	if d := cmp.Diff(want, f.Lines()); d != "" {
		t.Fatalf("commands (-want +got):\n%s", d)
	}
}

func TestErrorAnswers(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		stderr string
		call   func(z *ZFS) error
		want   error // nil: succeeds
	}{
		{"destroy missing is done", "cannot open 'tank/x': dataset does not exist\n",
			func(z *ZFS) error { return z.Destroy(ctx, "tank/x", true) }, nil},
		{"destroy with clones", "cannot destroy 'tank/images/a': filesystem has dependent clones\nuse '-R' to destroy the following datasets:\ntank/containers/c1\n",
			func(z *ZFS) error { return z.Destroy(ctx, "tank/images/a", true) }, ErrHasClones},
		{"destroy snapshot with clones", "cannot destroy 'tank/images/a@layer': snapshot has dependent clones\n",
			func(z *ZFS) error { return z.Destroy(ctx, "tank/images/a@layer", false) }, ErrHasClones},
		{"destroy busy", "cannot unmount '/tank/c': pool or dataset is busy\n",
			func(z *ZFS) error { return z.Destroy(ctx, "tank/c", true) }, ErrBusy},
		{"clone exists", "cannot create 'tank/images/b': dataset already exists\n",
			func(z *ZFS) error { return z.Clone(ctx, "tank/images/a@layer", "tank/images/b", nil) }, ErrExists},
		{"clone of missing snapshot", "cannot open 'tank/images/a@layer': dataset does not exist\n",
			func(z *ZFS) error { return z.Clone(ctx, "tank/images/a@layer", "tank/images/b", nil) }, ErrNotFound},
		{"snapshot exists", "cannot create snapshot 'tank/images/b@layer': dataset already exists\n",
			func(z *ZFS) error { return z.Snapshot(ctx, "tank/images/b@layer") }, ErrExists},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := sys.NewFake().On("zfs", sys.Answer{Stderr: c.stderr, Code: 1})
			err := c.call(New(f))
			if c.want == nil {
				if err != nil {
					t.Fatalf("got %v, want success", err)
				}
				return
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			var ee *sys.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("error %v lost the exit error", err)
			}
		})
	}
}

func TestExistsAndChildren(t *testing.T) {
	ctx := context.Background()
	f := sys.NewFake()
	f.On("zfs list -H -o name -t snapshot tank/images/a@layer", sys.Answer{Stdout: "tank/images/a@layer\n"})
	f.On("zfs list -H -o name -t snapshot tank/images/b@layer", sys.Answer{Stderr: "cannot open 'tank/images/b@layer': dataset does not exist\n", Code: 1})
	f.On("zfs list -H -p -r -d 1 -t filesystem -o name,origin,mountpoint tank/images", sys.Answer{Stdout: "tank/images\t-\t/tank/images\ntank/images/a\t-\t/tank/images/a\ntank/images/b\ttank/images/a@layer\t/tank/images/b\n"})
	f.On("zfs list -H -p -r -d 1 -t filesystem -o name,origin,mountpoint tank/none", sys.Answer{Stderr: "cannot open 'tank/none': dataset does not exist\n", Code: 1})
	f.On("zfs list -H -o name -t filesystem tank/broken", sys.Answer{Stderr: "permission denied\n", Code: 1})
	z := New(f)
	if ok, err := z.Exists(ctx, "tank/images/a@layer"); !ok || err != nil {
		t.Fatalf("Exists(a@layer) = %v, %v; want true", ok, err)
	}
	if ok, err := z.Exists(ctx, "tank/images/b@layer"); ok || err != nil {
		t.Fatalf("Exists(b@layer) = %v, %v; want false", ok, err)
	}
	if _, err := z.Exists(ctx, "tank/broken"); err == nil {
		t.Fatal("Exists(tank/broken) hid a failure")
	}
	got, err := z.Children(ctx, "tank/images")
	if err != nil {
		t.Fatal(err)
	}
	want := []Dataset{{Name: "tank/images/a", Mountpoint: "/tank/images/a"}, {Name: "tank/images/b", Origin: "tank/images/a@layer", Mountpoint: "/tank/images/b"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("Children (-want +got):\n%s", d)
	}
	if got, err := z.Children(ctx, "tank/none"); err != nil || len(got) != 0 {
		t.Fatalf("Children(missing) = %v, %v; want none", got, err)
	}
}

func TestRefusesBadNames(t *testing.T) {
	f := sys.NewFake()
	z := New(f)
	if err := z.Clone(context.Background(), "tank/a", "tank/b", nil); err == nil {
		t.Fatal("clone from a non-snapshot accepted")
	}
	if err := z.Snapshot(context.Background(), "tank/a"); err == nil {
		t.Fatal("snapshot without @ accepted")
	}
	if len(f.Lines()) != 0 {
		t.Fatalf("ran %v for refused names", f.Lines())
	}
	f2 := sys.NewFake().On("zfs get", sys.Answer{Stdout: "legacy\n"})
	if _, err := New(f2).Mountpoint(context.Background(), "tank/a"); err == nil {
		t.Fatal("legacy mountpoint accepted")
	}
}
