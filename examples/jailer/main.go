// Command jailer pulls an OCI image and runs it once as a container, with
// Legion's image and jail packages alone: no cluster, no Raft, no gRPC
// server. It is the smallest program that embeds the runtime, and a test
// holds its dependency list to that.
//
//	jailer [-data DIR] [-platform jails|process] [-zfs-root POOL/DATASET] IMAGE [-- ARG...]
//
// The ARGs replace the image's command (what follows its entrypoint), as
// `docker run IMAGE ARG...` does. The container's output goes to this
// program's stdout and stderr, and jailer exits with the container's exit
// code. On FreeBSD the container is a jail on a ZFS clone of the image
// (run as root); elsewhere `-platform process` runs it as a plain,
// unisolated process in the image's unpacked root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/legionbsd/legion/image"
	"github.com/legionbsd/legion/jail"
	"github.com/legionbsd/legion/jail/process"
	// The runtimes start their containers through a supervisor, which is
	// this same binary: package shim runs it when asked.
	_ "github.com/legionbsd/legion/jail/shim"
	"github.com/legionbsd/legion/sys"
	"github.com/legionbsd/legion/zfs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code, err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "jailer:", err)
		os.Exit(125)
	}
	os.Exit(code)
}

type options struct {
	data, platform, zfsRoot string
	ref                     string
	args                    []string
}

func parse(argv []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("jailer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.data, "data", filepath.Join(os.TempDir(), "jailer"), "where images, containers and their output are kept")
	def := "process"
	if runtime.GOOS == "freebsd" {
		def = "jails"
	}
	fs.StringVar(&o.platform, "platform", def, "jails (FreeBSD, as root) or process (any host, no isolation)")
	fs.StringVar(&o.zfsRoot, "zfs-root", "zroot/jailer", "dataset holding the images' layers (jails)")
	if err := fs.Parse(argv); err != nil {
		return o, err
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return o, errors.New("an image reference is required: jailer [flags] IMAGE [-- ARG...]")
	}
	o.ref, o.args = rest[0], rest[1:]
	if len(o.args) > 0 && o.args[0] == "--" {
		o.args = o.args[1:]
	}
	if o.platform != "jails" && o.platform != "process" {
		return o, fmt.Errorf("-platform %q: expected jails or process", o.platform)
	}
	return o, nil
}

// run pulls the image, runs one container of it and returns its exit code.
func run(ctx context.Context, argv []string, stdout, stderr io.Writer) (int, error) {
	o, err := parse(argv, stderr)
	if err != nil {
		return 0, err
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	if err := os.MkdirAll(o.data, 0o700); err != nil {
		return 0, err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	var store image.Store
	var rt jail.Runtime
	switch o.platform {
	case "jails":
		runner := sys.Exec{}
		store = image.NewZFSStore(zfs.New(runner), o.zfsRoot)
		j, err := jail.NewJails(jail.Config{DataDir: o.data, Runner: runner, Shim: exe, Log: log})
		if err != nil {
			return 0, err
		}
		rt = j
	case "process":
		ds, err := image.NewDirStore(filepath.Join(o.data, "layers"))
		if err != nil {
			return 0, err
		}
		store = ds
		p, err := process.New(process.Config{DataDir: o.data, Shim: exe, Log: log})
		if err != nil {
			return 0, err
		}
		rt = p
	}
	images, err := image.Open(image.Options{DataDir: o.data, Store: store, Log: log,
		Platform: image.PlatformRule{Arch: runtime.GOARCH, AllowLinux: o.platform == "process" && runtime.GOOS == "linux"}})
	if err != nil {
		return 0, err
	}
	defer images.Close()

	rec, err := images.Pull(ctx, o.ref, image.PullOptions{Now: time.Now()})
	if err != nil {
		return 0, err
	}
	cfg, err := rec.ParsedConfig()
	if err != nil {
		return 0, err
	}
	cc := cfg.Config
	command := append(append([]string{}, cc.Entrypoint...), cc.Cmd...)
	if len(o.args) > 0 {
		command = append(append([]string{}, cc.Entrypoint...), o.args...)
	}
	if len(command) == 0 {
		return 0, fmt.Errorf("image %s has no entrypoint or command, and none was given", o.ref)
	}

	id := fmt.Sprintf("jailer-%d", os.Getpid())
	root, err := images.PrepareRoot(ctx, id, o.ref, "", time.Now())
	if err != nil {
		return 0, err
	}
	// Cleanups run whatever happens from here, on a context of their own
	// so an interrupt still removes what was made.
	defer images.RemoveRoot(context.WithoutCancel(ctx), id)
	pod := id + "-pod"
	if err := rt.Create(ctx, jail.ContainerSpec{ID: pod, Infra: true, Root: jail.Root{Path: root}}); err != nil {
		return 0, fmt.Errorf("pod: %w", err)
	}
	defer rt.Remove(context.WithoutCancel(ctx), pod)
	spec := jail.ContainerSpec{ID: id, Pod: pod, Image: o.ref, Command: command, ImageEnv: cc.Env,
		User: cc.User, WorkDir: cc.WorkingDir, Root: jail.Root{Path: root}}
	if err := rt.Create(ctx, spec); err != nil {
		return 0, err
	}
	events, err := rt.Events(ctx)
	if err != nil {
		return 0, err
	}
	if err := rt.Start(ctx, id); err != nil {
		return 0, err
	}
	st, err := waitExit(ctx, rt, events, id)
	if err != nil {
		rt.Stop(context.WithoutCancel(ctx), id, -1)
		return 0, err
	}
	if err := copyLogs(ctx, rt, id, stdout, stderr); err != nil {
		return 0, err
	}
	return st.ExitCode, nil
}

// waitExit waits for the container's end, as its events report it.
func waitExit(ctx context.Context, rt jail.Runtime, events <-chan jail.Event, id string) (jail.ContainerStatus, error) {
	for {
		st, err := rt.Inspect(ctx, id)
		if err != nil {
			return st, err
		}
		if st.State == jail.StateExited {
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-events:
		}
	}
}

// copyLogs writes the container's saved output, stdout and stderr apart.
func copyLogs(ctx context.Context, rt jail.Runtime, id string, stdout, stderr io.Writer) error {
	r, err := rt.Logs(ctx, id, jail.LogOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	for line := range strings.Lines(string(data)) {
		rec, err := jail.ParseRecord(strings.TrimSuffix(line, "\n"))
		if err != nil {
			return err
		}
		w := stdout
		if rec.Stream == "stderr" {
			w = stderr
		}
		text := rec.Text
		if !rec.Partial {
			text += "\n"
		}
		if _, err := io.WriteString(w, text); err != nil {
			return err
		}
	}
	return nil
}
