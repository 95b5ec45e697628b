package image

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
)

// Diff writes, as a layer tar, what changed from the tree lower to the
// tree upper: entries new or changed in upper (type, mode, owner, size,
// modification time, link target or file flags differ) and a whiteout for
// each entry of lower that upper lacks. Both trees are walked without
// following links. It is how a build host turns a step's root (a copy of
// the base layer, changed) into a layer. Like other tools that compare
// trees, it takes a file whose size and modification time are unchanged
// for unchanged.
func Diff(ctx context.Context, lower, upper string, w io.Writer) error {
	tw := tar.NewWriter(w)
	emitted := map[inodeKey]string{}
	var walk func(rel string) error
	walk = func(rel string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		up := filepath.Join(upper, rel)
		ents, err := os.ReadDir(up)
		if err != nil {
			return err
		}
		names := map[string]bool{}
		for _, e := range ents {
			names[e.Name()] = true
			crel := path.Join(rel, e.Name())
			ui, err := os.Lstat(filepath.Join(upper, crel))
			if err != nil {
				return err
			}
			li, lerr := os.Lstat(filepath.Join(lower, crel))
			if lerr != nil && !errors.Is(lerr, fs.ErrNotExist) {
				return lerr
			}
			if lerr != nil || changed(li, ui, filepath.Join(lower, crel), filepath.Join(upper, crel)) {
				if err := writeEntry(tw, filepath.Join(upper, crel), crel, ui, emitted); err != nil {
					return err
				}
			}
			if ui.IsDir() {
				if err := walk(crel); err != nil {
					return err
				}
			}
		}
		// What lower has here and upper does not: whiteouts.
		lents, err := os.ReadDir(filepath.Join(lower, rel))
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
		var gone []string
		for _, e := range lents {
			if !names[e.Name()] {
				gone = append(gone, e.Name())
			}
		}
		sort.Strings(gone)
		for _, n := range gone {
			h := &tar.Header{Name: path.Join(rel, whiteoutPrefix+n), Typeflag: tar.TypeReg, Mode: 0o600, Format: tar.FormatPAX}
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
		}
		return nil
	}
	// The roots' own mode and owner are part of the layer when they differ.
	li, err := os.Lstat(lower)
	if err != nil {
		return err
	}
	ui, err := os.Lstat(upper)
	if err != nil {
		return err
	}
	if changed(li, ui, lower, upper) {
		if err := writeEntry(tw, upper, ".", ui, emitted); err != nil {
			return err
		}
	}
	if err := walk(""); err != nil {
		return err
	}
	return tw.Close()
}

// inodeKey names a file across its hard links.
type inodeKey struct{ dev, ino uint64 }

// changed compares what a layer carries of a file.
func changed(li, ui os.FileInfo, lp, up string) bool {
	if li.Mode() != ui.Mode() || flagsOf(li) != flagsOf(ui) {
		return true
	}
	ls, lok := li.Sys().(*syscall.Stat_t)
	us, uok := ui.Sys().(*syscall.Stat_t)
	if lok && uok && (ls.Uid != us.Uid || ls.Gid != us.Gid) {
		return true
	}
	switch {
	case ui.Mode()&os.ModeSymlink != 0:
		a, _ := os.Readlink(lp)
		b, _ := os.Readlink(up)
		return a != b
	case ui.IsDir():
		return false // a directory's own metadata only; its entries are walked
	case ui.Mode().IsRegular():
		return li.Size() != ui.Size() || !li.ModTime().Equal(ui.ModTime())
	}
	return lok && uok && ls.Rdev != us.Rdev
}

// writeEntry writes the file at p as the layer entry rel (slashed), as a
// hard link to an entry already written when it shares its inode; diffs
// and packed directories both write their entries with it.
func writeEntry(tw *tar.Writer, p, rel string, fi os.FileInfo, emitted map[inodeKey]string) error {
	link := ""
	if fi.Mode()&os.ModeSymlink != 0 {
		l, err := os.Readlink(p)
		if err != nil {
			return err
		}
		link = l
	}
	h, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return err
	}
	h.Name = rel
	if fi.IsDir() {
		h.Name = rel + "/"
	}
	h.Uname, h.Gname, h.Format = "", "", tar.FormatPAX
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		if fi.Mode().IsRegular() && st.Nlink > 1 {
			k := inodeKey{uint64(st.Dev), uint64(st.Ino)}
			if first, seen := emitted[k]; seen {
				h.Typeflag, h.Linkname, h.Size = tar.TypeLink, first, 0
			} else {
				emitted[k] = h.Name
			}
		}
	}
	if names := flagNames(flagsOf(fi)); names != "" {
		h.PAXRecords = map[string]string{paxFlags: names}
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if h.Typeflag != tar.TypeReg {
		return nil
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
