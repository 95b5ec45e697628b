package testimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/legionbsd/legion/internal/testimage"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return c
}

// layerFiles reads the image's one layer into name -> (header, data).
type entry struct {
	hdr  *tar.Header
	data []byte
}

func layerFiles(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("layers: %d, want 1", len(layers))
	}
	mt, err := layers[0].MediaType()
	if err != nil || mt != types.OCILayer {
		t.Fatalf("layer media type %q (%v), want %q", mt, err, types.OCILayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[hdr.Name] = entry{hdr, data}
	}
	return out
}

// checkImage asserts what every image the helper makes holds.
func checkImage(t *testing.T, img v1.Image, wantCmd []string, wantEnv []string) {
	t.Helper()
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Fatalf("manifest media type %q (%v), want OCI", mt, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	got := struct {
		OS, Arch, User, WorkDir string
		Entrypoint, Cmd, Env    []string
	}{cf.OS, cf.Architecture, cf.Config.User, cf.Config.WorkingDir, cf.Config.Entrypoint, cf.Config.Cmd, cf.Config.Env}
	want := got
	want.OS, want.Arch, want.User, want.WorkDir = runtime.GOOS, runtime.GOARCH, "app", "/app"
	want.Entrypoint, want.Cmd, want.Env = []string{"/app/server"}, wantCmd, wantEnv
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("config (-want +got):\n%s", d)
	}
	files := layerFiles(t, img)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	if d := cmp.Diff([]string{"./", "app/", "app/server", "etc/", "etc/group", "etc/passwd", "tmp/"}, names); d != "" {
		t.Errorf("layer files (-want +got):\n%s", d)
	}
	if string(files["etc/passwd"].data) != testimage.Passwd || string(files["etc/group"].data) != testimage.Group {
		t.Errorf("passwd %q group %q", files["etc/passwd"].data, files["etc/group"].data)
	}
	srv := files["app/server"]
	if srv.hdr.Mode&0o111 == 0 || len(srv.data) == 0 {
		t.Fatalf("app/server: mode %o, %d bytes: want an executable", srv.hdr.Mode, len(srv.data))
	}
	if files["tmp/"].hdr.Mode&0o1777 != 0o1777 {
		t.Errorf("tmp/: mode %o, want 1777", files["tmp/"].hdr.Mode)
	}
	if runtime.GOOS == "linux" {
		f, err := elf.NewFile(bytes.NewReader(srv.data))
		if err != nil {
			t.Fatalf("app/server: %v", err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Fatalf("app/server asks for a dynamic loader: want a static binary")
			}
		}
	}
	// The binary runs: its print-and-exit mode.
	bin := filepath.Join(t.TempDir(), "server")
	if err := os.WriteFile(bin, srv.data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "-say", "hello", "-err", "oops", "-exit", "7").Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 || string(out) != "hello\n" || string(ee.Stderr) != "oops\n" {
		t.Fatalf("server -say hello -err oops -exit 7: out %q err %v", out, err)
	}
}

func TestImagePushedAndPulledBack(t *testing.T) {
	img, err := testimage.Build(ctx(t), testimage.Options{Cmd: []string{"-listen", ":9000"}, Env: []string{"NAME=one"}})
	if err != nil {
		t.Fatal(err)
	}
	wantCmd, wantEnv := []string{"-listen", ":9000"}, []string{"PATH=/app", "NAME=one"}
	checkImage(t, img, wantCmd, wantEnv)

	reg := testimage.StartRegistry()
	defer reg.Close()
	ref := reg.Ref("legion/test-server", "v1")
	if !strings.HasPrefix(ref, "127.0.0.1:") {
		t.Fatalf("reference %s: want the registry on loopback", ref)
	}
	if err := testimage.Push(ctx(t), img, ref); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	pulled, err := remote.Image(r, remote.WithContext(ctx(t)))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	wantDigest, _ := img.Digest()
	gotDigest, err := pulled.Digest()
	if err != nil || gotDigest != wantDigest {
		t.Fatalf("pulled digest %v (%v), want %v", gotDigest, err, wantDigest)
	}
	checkImage(t, pulled, wantCmd, wantEnv)
}

func TestArchiveHoldsANamedOCILayout(t *testing.T) {
	// Packing needs no compiler: any bytes stand for the binary here.
	img, err := testimage.Pack([]byte("#!/not/a/real/binary\n"), testimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	arch := filepath.Join(t.TempDir(), "image.tar")
	const ref = "localhost/legion/test-server:v1"
	if err := testimage.WriteArchive(arch, img, ref); err != nil {
		t.Fatal(err)
	}
	// Unpack the archive and read it as a layout.
	dir := t.TempDir()
	f, err := os.Open(arch)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if hdr.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		data, _ := io.ReadAll(tr)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"oci-layout", "index.json", "blobs/"} {
		if !slices.Contains(names, want) {
			t.Errorf("archive entries %q: missing %s", names, want)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations[testimage.AnnotationRefName] != ref {
		t.Fatalf("index manifests %+v, want one named %s", m.Manifests, ref)
	}
	want, _ := img.Digest()
	if m.Manifests[0].Digest != want {
		t.Fatalf("index digest %v, want %v", m.Manifests[0].Digest, want)
	}
	got, err := idx.Image(want)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := got.ConfigFile()
	if err != nil || !slices.Equal(cf.Config.Entrypoint, []string{"/app/server"}) || cf.Config.User != "app" {
		t.Fatalf("config from the archive: %+v %v", cf, err)
	}
	if files := layerFiles(t, got); !strings.HasPrefix(string(files["app/server"].data), "#!/not/a/real") {
		t.Fatalf("app/server from the archive: %q", files["app/server"].data)
	}
}
