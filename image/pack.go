package image

import (
	"archive/tar"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// packDir writes a directory tree as a layer tar: sorted, numeric owners,
// modes with setuid bits, links, hard links and, where the host has them,
// file flags (SCHILY.fflags, as bsdtar writes them). Times are kept.
func packDir(ctx context.Context, dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	seen := map[inodeKey]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		return writeEntry(tw, p, filepath.ToSlash(rel), fi, seen)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}
