package testimage_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testimage"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/jailtest"
	"github.com/legionbsd/legion/jail/process"
	// The test binary is also the process runtime's supervisor.
	_ "github.com/legionbsd/legion/jail/shim"
)

// TestMain stops a supervisor that got this far (see
// jailtest.RefuseSupervisor).
func TestMain(m *testing.M) {
	jailtest.RefuseSupervisor()
	os.Exit(m.Run())
}

// The whole path the end-to-end tests take: the image built here, pushed
// to the in-process registry and, as an OCI archive, loaded; pulled by
// Legion's image store into a directory root; run by the process runtime
// with the image's entrypoint, environment and user; answering HTTP.
func TestImageRunsThroughStoreAndProcessRuntime(t *testing.T) {
	c := ctx(t)
	port := testaddr.Port(t) // the server process binds it
	img, err := testimage.Build(c, testimage.Options{Cmd: []string{"-listen", "127.0.0.1:" + strconv.Itoa(port)}, Env: []string{"NAME=chain"}})
	if err != nil {
		t.Fatal(err)
	}
	reg := testimage.StartRegistry()
	defer reg.Close()
	ref := reg.Ref("legion/test-server", "v1")
	if err := testimage.Push(c, img, ref); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "image.tar")
	const localRef = "localhost/legion/test-server:v1"
	if err := testimage.WriteArchive(archive, img, localRef); err != nil {
		t.Fatal(err)
	}

	data := t.TempDir()
	store, err := image.NewDirStore(filepath.Join(data, "store"))
	if err != nil {
		t.Fatal(err)
	}
	images, err := image.Open(image.Options{DataDir: data, Store: store, Log: slog.New(slog.DiscardHandler),
		Platform: image.PlatformRule{Arch: runtime.GOARCH, AllowLinux: runtime.GOOS == "linux"}})
	if err != nil {
		t.Fatal(err)
	}
	defer images.Close()
	pulled, err := images.Pull(c, ref, image.PullOptions{Now: time.Now()})
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := images.Load(c, f, "", time.Now())
	f.Close()
	if err != nil || len(loaded) != 1 || !strings.Contains(loaded[0].Reference, "legion/test-server:v1") {
		t.Fatalf("load of the archive: %v %v, want %s", loaded, err, localRef)
	}
	if loaded[0].Manifest != pulled.Manifest {
		t.Fatalf("loaded manifest %s, pulled %s: want the same image", loaded[0].Manifest, pulled.Manifest)
	}

	var cf v1.ConfigFile
	if err := json.Unmarshal(pulled.Config, &cf); err != nil {
		t.Fatalf("config of the pulled image: %v", err)
	}
	rootDir, err := images.PrepareRoot(c, "web", ref, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rt, err := process.New(process.Config{DataDir: filepath.Join(data, "runtime"), Shim: mustExe(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Wait()
	spec := jail.ContainerSpec{ID: "web", Command: append(cf.Config.Entrypoint, cf.Config.Cmd...),
		ImageEnv: cf.Config.Env, User: cf.Config.User, WorkDir: cf.Config.WorkingDir, Root: jail.Root{Path: rootDir}}
	if err := rt.Create(c, spec); err != nil {
		t.Fatal(err)
	}
	defer rt.Remove(context.Background(), "web")
	if err := rt.Start(c, "web"); err != nil {
		t.Fatal(err)
	}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body := make([]byte, 64)
			n, _ := resp.Body.Read(body)
			resp.Body.Close()
			if got := strings.TrimSpace(string(body[:n])); got != "chain" {
				t.Fatalf("GET /: %q, want the image's NAME", got)
			}
			break
		}
		if time.Now().After(deadline) {
			st, _ := rt.Inspect(c, "web")
			t.Fatalf("server never answered: %v; container %+v", err, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := rt.Remove(c, "web"); err != nil {
		t.Fatal(err)
	}
	if err := images.RemoveRoot(c, "web"); err != nil {
		t.Fatal(err)
	}
}

func mustExe(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
