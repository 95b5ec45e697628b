package jail

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion/sys"
)

// A pod's host path (a compose bind mount) is mounted with mount_nullfs
// like any other pod volume: a file over a file made in the root, read-only
// when asked. A path missing on the node fails before anything is
// mounted, naming it; mount_nullfs refusing (FreeBSD's text) undoes the
// mounts made before it.
func TestHostPathMounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t)
	e.fake.On("jls --libxo=json -j pod1 ", jlsAnswer("pod1", append([]Param{{"vnet", "new"}}, InfraParams(nil)...)))
	e.fake.On("jls --libxo=json -j pod1.web ", jlsAnswer("pod1.web", ContainerParams(Security{}, true)))
	if err := e.j.Create(ctx, ContainerSpec{ID: "pod1", Infra: true, Labels: map[string]string{"legion.task": "t1"}}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	e.fake.Reset()
	hostDir := t.TempDir()
	conf := filepath.Join(hostDir, "app.conf")
	if err := os.WriteFile(conf, []byte("x=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := func(id, root string, mounts ...Mount) ContainerSpec {
		return ContainerSpec{ID: id, Pod: "pod1", Labels: map[string]string{"legion.task": "t1"},
			Command: []string{"/usr/local/bin/web"}, Root: Root{Path: root}, Mounts: mounts}
	}

	root := t.TempDir()
	if err := e.j.Create(ctx, spec("web", root,
		Mount{Kind: MountNullfs, Source: hostDir, Target: "/srv/data"},
		Mount{Kind: MountNullfs, Source: conf, Target: "/etc/app.conf", ReadOnly: true})); err != nil {
		t.Fatalf("create web: %v", err)
	}
	e.wantLines([]string{
		"mount -t devfs devfs " + root + "/dev",
		"devfs -m " + root + "/dev ruleset 4",
		"devfs -m " + root + "/dev rule applyset",
		"mount_nullfs " + hostDir + " " + root + "/srv/data",
		"mount_nullfs -o ro " + conf + " " + root + "/etc/app.conf",
	})
	if st, err := os.Stat(filepath.Join(root, "etc/app.conf")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("file target: %v; want a file made inside the root", err)
	}

	missing := filepath.Join(hostDir, "gone")
	err := e.j.Create(ctx, spec("missing", t.TempDir(), Mount{Kind: MountNullfs, Source: missing, Target: "/data"}))
	if err == nil || !strings.Contains(err.Error(), "mounts[0].source "+missing) {
		t.Fatalf("a missing host path: got %v, want an error naming it", err)
	}
	for _, l := range e.fake.Lines() {
		if strings.HasPrefix(l, "mount") {
			t.Fatalf("mounted something for a container whose host path is missing: %q", e.fake.Lines())
		}
	}
	e.fake.Reset()

	e.fake.Once("mount_nullfs", sys.Answer{Code: 1, Stderr: "mount_nullfs: " + hostDir + ": Resource deadlock avoided\n"})
	root2 := t.TempDir()
	err = e.j.Create(ctx, spec("refused", root2, Mount{Kind: MountNullfs, Source: hostDir, Target: "/srv/data"}))
	if err == nil || !strings.Contains(err.Error(), "Resource deadlock avoided") {
		t.Fatalf("mount_nullfs refusing: got %v, want its message", err)
	}
	if !slices.Contains(e.fake.Lines(), "umount -f "+root2+"/dev") {
		t.Errorf("the devfs mounted before was not undone: %q", e.fake.Lines())
	}
}
