package zfs

import (
	"context"
	"fmt"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// Snapshots lists the snapshots of one dataset (not of its children),
// oldest first, by their short names (after the '@'). A missing dataset
// answers ErrNotFound.
func (z *ZFS) Snapshots(ctx context.Context, dataset string) ([]string, error) {
	res, err := z.run(ctx, "list", "-H", "-p", "-o", "name", "-t", "snapshot", "-s", "createtxg", "-d", "1", dataset)
	if err != nil {
		return nil, fmt.Errorf("list snapshots of %s: %w", dataset, err)
	}
	var out []string
	for _, line := range strings.Split(string(res.Stdout), "\n") {
		if line == "" {
			continue
		}
		ds, snap, ok := strings.Cut(line, "@")
		if !ok || ds != dataset {
			return nil, fmt.Errorf("list snapshots of %s: unexpected line %q (want %s@name)", dataset, line, dataset)
		}
		out = append(out, snap)
	}
	return out, nil
}

// Rollback returns a dataset to snapshot (dataset@snap), destroying the
// snapshots taken after it (zfs rollback -r) so it works whatever came
// later. A missing snapshot answers ErrNotFound.
func (z *ZFS) Rollback(ctx context.Context, snapshot string) error {
	if !strings.Contains(snapshot, "@") {
		return fmt.Errorf("rollback to %q: want dataset@snap", snapshot)
	}
	if _, err := z.run(ctx, "rollback", "-r", snapshot); err != nil {
		return fmt.Errorf("rollback to %s: %w", snapshot, err)
	}
	return nil
}

// Mounted reports whether a file system is mounted (its mounted property).
func (z *ZFS) Mounted(ctx context.Context, name string) (bool, error) {
	v, err := z.Get(ctx, name, "mounted")
	if err != nil {
		return false, err
	}
	switch v {
	case "yes":
		return true, nil
	case "no", "-":
		return false, nil
	}
	return false, fmt.Errorf("dataset %s: mounted is %q, want yes or no", name, v)
}

// Mount mounts a file system at its mountpoint, e.g. one received with
// zfs receive -u. One mounted already is left as it is.
func (z *ZFS) Mount(ctx context.Context, name string) error {
	_, err := z.run(ctx, "mount", name)
	if sys.IsExit(err, "filesystem already mounted") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("mount %s: %w", name, err)
	}
	return nil
}
