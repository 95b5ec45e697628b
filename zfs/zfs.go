package zfs

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// Errors callers branch on. Each wraps the *sys.ExitError that carried it.
var (
	// ErrNotFound: the dataset or snapshot does not exist.
	ErrNotFound = errors.New("zfs: dataset does not exist")
	// ErrExists: a dataset or snapshot of that name already exists.
	ErrExists = errors.New("zfs: dataset already exists")
	// ErrHasClones: a snapshot (or a dataset's snapshot) has clones made
	// from it, so it cannot be destroyed until they go.
	ErrHasClones = errors.New("zfs: dataset has dependent clones")
	// ErrBusy: the dataset is mounted and in use.
	ErrBusy = errors.New("zfs: dataset is busy")
)

// ZFS runs zfs(8) through a system runner.
type ZFS struct {
	r sys.Runner
}

// New returns a ZFS that runs its commands through r.
func New(r sys.Runner) *ZFS { return &ZFS{r: r} }

// Dataset is one row of zfs list.
type Dataset struct {
	Name       string
	Origin     string // the snapshot a clone was made from; "" when none
	Mountpoint string // "" when none or legacy
}

// classify maps zfs(8)'s answers to the package's errors, keeping the
// original error wrapped for its message.
func classify(err error) error {
	if err == nil {
		return nil
	}
	switch {
	case sys.IsExit(err, "does not exist"):
		return errors.Join(ErrNotFound, err)
	case sys.IsExit(err, "already exists"):
		return errors.Join(ErrExists, err)
	case sys.IsExit(err, "dependent clones"):
		return errors.Join(ErrHasClones, err)
	case sys.IsExit(err, "dataset is busy"), sys.IsExit(err, "pool or dataset is busy"):
		return errors.Join(ErrBusy, err)
	}
	return err
}

func (z *ZFS) run(ctx context.Context, args ...string) (sys.Result, error) {
	res, err := z.r.Run(ctx, sys.Command("zfs", args...))
	return res, classify(err)
}

// propArgs renders properties as -o k=v in key order, so command lines
// are stable.
func propArgs(props map[string]string) []string {
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		out = append(out, "-o", k+"="+props[k])
	}
	return out
}

// Create makes a file system and any missing parents. The lab found
// zfs create -p succeeds on an existing dataset, so Create is idempotent.
func (z *ZFS) Create(ctx context.Context, name string, props map[string]string) error {
	args := append([]string{"create", "-p"}, propArgs(props)...)
	args = append(args, name)
	if _, err := z.run(ctx, args...); err != nil {
		return fmt.Errorf("create dataset %s: %w", name, err)
	}
	return nil
}

// Clone makes name a clone of snapshot. An existing name answers ErrExists.
func (z *ZFS) Clone(ctx context.Context, snapshot, name string, props map[string]string) error {
	if !strings.Contains(snapshot, "@") {
		return fmt.Errorf("clone %s: origin %q is not a snapshot (want dataset@snap)", name, snapshot)
	}
	args := append([]string{"clone"}, propArgs(props)...)
	args = append(args, snapshot, name)
	if _, err := z.run(ctx, args...); err != nil {
		return fmt.Errorf("clone %s to %s: %w", snapshot, name, err)
	}
	return nil
}

// Snapshot takes dataset@snap. An existing snapshot answers ErrExists.
func (z *ZFS) Snapshot(ctx context.Context, name string) error {
	if !strings.Contains(name, "@") {
		return fmt.Errorf("snapshot %q: want dataset@snap", name)
	}
	if _, err := z.run(ctx, "snapshot", name); err != nil {
		return fmt.Errorf("snapshot %s: %w", name, err)
	}
	return nil
}

// Destroy removes a dataset or snapshot; recursive takes its snapshots and
// children with it (zfs destroy -r), never clones made elsewhere from them
// (those answer ErrHasClones). A name that does not exist is already gone,
// so Destroy succeeds.
func (z *ZFS) Destroy(ctx context.Context, name string, recursive bool) error {
	args := []string{"destroy"}
	if recursive {
		args = append(args, "-r")
	}
	args = append(args, name)
	_, err := z.run(ctx, args...)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("destroy %s: %w", name, err)
	}
	return nil
}

// Exists reports whether a dataset or snapshot exists.
func (z *ZFS) Exists(ctx context.Context, name string) (bool, error) {
	typ := "filesystem"
	if strings.Contains(name, "@") {
		typ = "snapshot"
	}
	_, err := z.run(ctx, "list", "-H", "-o", "name", "-t", typ, name)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up %s: %w", name, err)
	}
	return true, nil
}

// Children lists the file systems directly below root (not root itself),
// with their origins and mountpoints. A missing root has none.
func (z *ZFS) Children(ctx context.Context, root string) ([]Dataset, error) {
	res, err := z.run(ctx, "list", "-H", "-p", "-r", "-d", "1", "-t", "filesystem", "-o", "name,origin,mountpoint", root)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	var out []Dataset
	for i, line := range strings.Split(strings.TrimRight(string(res.Stdout), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("list %s: line %d: want 3 tab-separated fields (name, origin, mountpoint), got %q", root, i+1, line)
		}
		if f[0] == root {
			continue
		}
		d := Dataset{Name: f[0], Origin: f[1], Mountpoint: f[2]}
		if d.Origin == "-" {
			d.Origin = ""
		}
		if d.Mountpoint == "-" || d.Mountpoint == "none" || d.Mountpoint == "legacy" {
			d.Mountpoint = ""
		}
		out = append(out, d)
	}
	return out, nil
}

// Get returns one property's parsable value (zfs get -H -p -o value).
func (z *ZFS) Get(ctx context.Context, name, prop string) (string, error) {
	res, err := z.run(ctx, "get", "-H", "-p", "-o", "value", prop, name)
	if err != nil {
		return "", fmt.Errorf("get %s of %s: %w", prop, name, err)
	}
	return strings.TrimRight(string(res.Stdout), "\n"), nil
}

// Set sets one property (zfs set prop=value name), e.g. a quota.
func (z *ZFS) Set(ctx context.Context, name, prop, value string) error {
	if _, err := z.run(ctx, "set", prop+"="+value, name); err != nil {
		return fmt.Errorf("set %s=%s on %s: %w", prop, value, name, err)
	}
	return nil
}

// Mountpoint returns where a file system is mounted, failing when it has
// none (legacy or none), since callers need a directory to write into.
func (z *ZFS) Mountpoint(ctx context.Context, name string) (string, error) {
	mp, err := z.Get(ctx, name, "mountpoint")
	if err != nil {
		return "", err
	}
	if mp == "" || mp == "-" || mp == "none" || mp == "legacy" {
		return "", fmt.Errorf("dataset %s: mountpoint is %q, want a directory", name, mp)
	}
	return mp, nil
}
