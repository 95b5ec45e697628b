package attach

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// pluginRequest is what a plugin reads on its standard input.
type pluginRequest struct {
	Namespace string            `json:"namespace"`
	Volume    string            `json:"volume"`
	Options   map[string]string `json:"options"`
}

// errPluginMissing is a plugin that is not installed on this node.
var errPluginMissing = errors.New("not installed on this node")

// pluginPath finds the plugin's executable.
func (a *Attacher) pluginPath(name string) (string, error) {
	p := filepath.Join(a.pluginDir(), name)
	st, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("plugin %q: %w (no %s)", name, errPluginMissing, p)
	case err != nil:
		return "", fmt.Errorf("plugin %q: %w", name, err)
	case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("plugin %q: %s is not an executable file (mode %s)", name, p, st.Mode())
	}
	return p, nil
}

// runPlugin runs `<plugin> <verb> <dir>` with the volume's request on its
// standard input. Exit 0 is success; otherwise its standard error is the
// reason.
func (a *Attacher) runPlugin(ctx context.Context, path, verb string, rec record) error {
	opts := rec.Options
	if opts == nil {
		opts = map[string]string{}
	}
	in, err := json.Marshal(pluginRequest{Namespace: rec.Namespace, Volume: rec.Volume, Options: opts})
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, path, verb, rec.Dir)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(in), &stdout, &stderr
	cmd.WaitDelay = pluginWaitDelay
	err = cmd.Run()
	if out := strings.TrimSpace(stdout.String()); out != "" {
		a.log().Debug("volume plugin output", "plugin", rec.Plugin, "verb", verb, "dir", rec.Dir, "stdout", out)
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = "(it wrote nothing on standard error)"
		}
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.Exited() {
			return fmt.Errorf("plugin %q %s %s: exit status %d: %s", rec.Plugin, verb, rec.Dir, ee.ExitCode(), msg)
		}
		return fmt.Errorf("plugin %q %s %s: %w: %s", rec.Plugin, verb, rec.Dir, err, msg)
	}
	return nil
}

// attachPlugin has the plugin mount the volume in the task's directory.
func (a *Attacher) attachPlugin(ctx context.Context, rec record) error {
	path, err := a.pluginPath(rec.Plugin)
	if err != nil {
		return err
	}
	// On FreeBSD the mount point is made here, as mount(8) needs it; on
	// the process platform the plugin makes the directory itself, and
	// that directory is all that can be checked there: a plugin for a
	// process node need not mount anything.
	mkdir := rec.Dir
	if a.Platform == PlatformProcess {
		mkdir = filepath.Dir(rec.Dir)
	}
	if err := os.MkdirAll(mkdir, 0o755); err != nil {
		return fmt.Errorf("plugin %q: making the mount point: %w", rec.Plugin, err)
	}
	if err := a.runPlugin(ctx, path, "mount", rec); err != nil {
		return err
	}
	if a.Platform == PlatformProcess {
		if st, err := os.Stat(rec.Dir); err != nil || !st.IsDir() {
			return fmt.Errorf("plugin %q mount exited 0 but made no directory at %s", rec.Plugin, rec.Dir)
		}
		return nil
	}
	mounted, err := a.mountedAt(ctx, rec.Dir)
	if err != nil {
		return fmt.Errorf("plugin %q: reading the mount table: %w", rec.Plugin, err)
	}
	if !mounted {
		return fmt.Errorf("plugin %q mount exited 0 but left nothing mounted at %s", rec.Plugin, rec.Dir)
	}
	return nil
}

// detachPlugin has the plugin unmount the volume; a plugin gone from the
// node meanwhile has its mount unmounted directly.
func (a *Attacher) detachPlugin(ctx context.Context, rec record) error {
	path, err := a.pluginPath(rec.Plugin)
	if errors.Is(err, errPluginMissing) {
		a.log().Warn("volume plugin gone from the node; unmounting its mount directly", "plugin", rec.Plugin, "dir", rec.Dir)
		return a.unmountWithoutPlugin(ctx, rec)
	}
	if err != nil {
		return err
	}
	if _, err := os.Stat(rec.Dir); errors.Is(err, fs.ErrNotExist) {
		// The mount never happened (a failed start): nothing to undo.
		return nil
	}
	if err := a.runPlugin(ctx, path, "unmount", rec); err != nil {
		return err
	}
	if a.Platform != PlatformProcess {
		mounted, err := a.mountedAt(ctx, rec.Dir)
		if err != nil {
			return fmt.Errorf("plugin %q: reading the mount table: %w", rec.Plugin, err)
		}
		if mounted {
			return fmt.Errorf("plugin %q unmount exited 0 but %s is still mounted", rec.Plugin, rec.Dir)
		}
	}
	a.removeMountPoint(rec.Dir)
	return nil
}

// unmountWithoutPlugin undoes a plugin's mount without the plugin. The
// process platform has no mount to undo, only the plugin's directory: it
// goes if empty, and one holding files stays recorded, as they may be the
// volume's data.
func (a *Attacher) unmountWithoutPlugin(ctx context.Context, rec record) error {
	if a.Platform != PlatformProcess {
		if err := a.unmount(ctx, rec.Dir); err != nil {
			return fmt.Errorf("plugin %q missing, unmounting %s directly: %w", rec.Plugin, rec.Dir, err)
		}
		return nil
	}
	if err := os.Remove(rec.Dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("plugin %q missing and %s not empty: left for the plugin's return: %w", rec.Plugin, rec.Dir, err)
	}
	return nil
}
