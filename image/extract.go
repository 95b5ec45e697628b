package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrUnsafePath is returned for a layer entry naming ".." or reaching
// through a symbolic link: such a layer could write outside its root.
var ErrUnsafePath = errors.New("unsafe path in layer")

const (
	whiteoutPrefix = ".wh."
	opaqueWhiteout = ".wh..wh..opq"
	// paxFlags is where bsdtar records file flags (schg, ...).
	paxFlags       = "SCHILY.fflags"
	paxXattrPrefix = "SCHILY.xattr."
)

// ApplyOptions tune ApplyLayer.
type ApplyOptions struct {
	// Flags clears and sets BSD file flags; nil on hosts without them.
	Flags FileFlags
	// Owners sets the numeric owners of the layer's files. Only root may,
	// so the store sets it when running as root.
	Owners bool
	Log    *slog.Logger
}

// ApplyLayer applies an uncompressed, verified layer tar onto root, which
// holds the layers below it: whiteouts first (removing, without following
// links, what the layer deletes), then the entries, refusing names with
// ".." or reaching through a link. Owners are kept numerically, modes with
// setuid bits, extended attributes where the file system takes them, and
// file flags through opts.Flags. The tar is read twice, so it must seek.
func ApplyLayer(ctx context.Context, root string, layer io.ReadSeeker, opts ApplyOptions) error {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	list, err := scanLayer(layer)
	if err != nil {
		return err
	}
	if _, err := layer.Seek(0, io.SeekStart); err != nil {
		return err
	}
	return applyScanned(ctx, root, layer, list, opts)
}

// applyScanned applies a layer whose names were checked and whiteouts
// collected by scanLayer.
func applyScanned(ctx context.Context, root string, layer io.Reader, list []whiteout, opts ApplyOptions) error {
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	a := &applier{ctx: ctx, root: root, o: opts}
	if ft, ok := layer.(*fileTar); ok {
		a.src = ft
	}
	if err := a.applyWhiteouts(list); err != nil {
		return err
	}
	return a.extract(layer)
}

// fileTar reads a tar kept in a file at an offset of its own (pread), so
// tar.Reader seeks over the bodies extraction copies file to file with
// the file's own offset.
type fileTar struct {
	f   *os.File
	off int64
}

func (t *fileTar) Read(p []byte) (int, error) {
	n, err := t.f.ReadAt(p, t.off)
	t.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Seek moves the offset only; tar.Reader skips bodies with it.
func (t *fileTar) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		t.off = offset
	case io.SeekCurrent:
		t.off += offset
	default:
		return t.off, errors.New("layer tar: no seeking from the end")
	}
	return t.off, nil
}

// copyBody copies the n bytes at the offset, the body of the entry
// tar.Reader just returned, to dst, file to file (copy_file_range where
// the system has it), leaving the offset for tar.Reader to seek past.
func (t *fileTar) copyBody(dst *os.File, n int64) error {
	if _, err := t.f.Seek(t.off, io.SeekStart); err != nil {
		return err
	}
	got, err := io.Copy(dst, io.LimitReader(t.f, n))
	if err == nil && got != n {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// sparse: a GNU sparse file in PAX form, whose body in the archive is not
// its contents; tar.Reader fills its holes.
func sparse(h *tar.Header) bool {
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}

type applier struct {
	ctx context.Context
	// src, when the layer is read from a file, copies regular files'
	// bodies file to file.
	src    *fileTar
	root   string
	o      ApplyOptions
	dirs   []dirMeta
	fflags [][2]string     // path, flags: set last, since schg forbids later changes
	known  map[string]bool // directories (slash paths under root) known not to be links
	warned map[string]bool
}

type dirMeta struct {
	path  string
	mode  os.FileMode
	mtime time.Time
}

func (a *applier) warnOnce(key, msg string, args ...any) {
	if a.warned == nil {
		a.warned = map[string]bool{}
	}
	if !a.warned[key] {
		a.warned[key] = true
		a.o.Log.Warn(msg, args...)
	}
}

// cleanName turns a tar entry name into a slash path relative to the
// root ("" for the root itself), refusing any ".." element.
func cleanName(name string) (string, error) {
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", fmt.Errorf("%w: %q names ..", ErrUnsafePath, name)
		}
	}
	p := path.Clean("/" + name)
	return strings.TrimPrefix(p, "/"), nil
}

// walkParents checks every directory above rel: none may be a link. With
// create, missing ones are made (0755, as tar does for implicit parents);
// otherwise a missing one ends the walk with exists=false.
//
// Directories found or made are remembered (a.known), so the entries of a
// directory do not look at its parents again; removing a directory
// forgets it and what is below it.
func (a *applier) walkParents(rel string, create bool) (exists bool, err error) {
	dir := path.Dir(rel)
	if dir == "." || dir == "" {
		return true, nil
	}
	if a.known[dir] {
		return true, nil
	}
	cur, sub := a.root, ""
	for i, el := range strings.Split(dir, "/") {
		cur = filepath.Join(cur, el)
		if i == 0 {
			sub = el
		} else {
			sub += "/" + el
		}
		if a.known[sub] {
			continue
		}
		fi, err := os.Lstat(cur)
		switch {
		case errors.Is(err, os.ErrNotExist):
			if !create {
				return false, nil
			}
			if err := os.Mkdir(cur, 0o755); err != nil {
				return false, err
			}
			a.know(sub)
			continue
		case err != nil:
			return false, err
		case fi.Mode()&os.ModeSymlink != 0:
			return false, fmt.Errorf("%w: %q goes through the link %s", ErrUnsafePath, rel, strings.TrimPrefix(cur, a.root))
		case !fi.IsDir():
			if !create {
				return false, nil // nothing can be below a file
			}
			return false, fmt.Errorf("layer entry %q: %s is not a directory", rel, strings.TrimPrefix(cur, a.root))
		}
		a.know(sub)
	}
	return true, nil
}

// reachable finds what is at p, a path under the root, now, with no link
// on the way to it.
func (a *applier) reachable(p string) (os.FileInfo, bool) {
	if p != a.root {
		rel, err := filepath.Rel(a.root, p)
		if err != nil {
			return nil, false
		}
		if ok, err := a.walkParents(filepath.ToSlash(rel), false); err != nil || !ok {
			return nil, false
		}
	}
	fi, err := os.Lstat(p)
	return fi, err == nil
}

// know remembers rel as a directory, not a link, of the root.
func (a *applier) know(rel string) {
	if a.known == nil {
		a.known = map[string]bool{}
	}
	a.known[rel] = true
}

// forget drops what is remembered of the directory at p and below it.
func (a *applier) forget(p string) {
	rel, err := filepath.Rel(a.root, p)
	if err != nil || len(a.known) == 0 {
		return
	}
	rel = filepath.ToSlash(rel)
	for k := range a.known {
		if k == rel || strings.HasPrefix(k, rel+"/") || rel == "." {
			delete(a.known, k)
		}
	}
}

// remove deletes path and what is below it, clearing flags that would
// refuse it. os.RemoveAll never follows links.
func (a *applier) remove(p string, fi os.FileInfo, always bool) error {
	if fi.IsDir() {
		a.forget(p)
	}
	if a.o.Flags != nil && (always || hasFlags(fi)) {
		if err := a.o.Flags.Clear(a.ctx, p, fi.IsDir()); err != nil {
			return fmt.Errorf("clear file flags of %s: %w", p, err)
		}
	}
	return os.RemoveAll(p)
}

// whiteout is one deletion a layer asks for.
type whiteout struct {
	dir, name string
	opaque    bool
}

// scanLayer reads a whole layer tar, checking every name and collecting
// its whiteouts, so a layer naming ".." is refused before anything
// changes. It reads to the end of the archive.
func scanLayer(r io.Reader) ([]whiteout, error) {
	var list []whiteout
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return list, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read layer: %w", err)
		}
		rel, err := cleanName(h.Name)
		if err != nil {
			return nil, err
		}
		if h.Typeflag == tar.TypeLink {
			if _, err := cleanName(h.Linkname); err != nil {
				return nil, err
			}
		}
		base := path.Base(rel)
		switch {
		case base == opaqueWhiteout:
			list = append(list, whiteout{dir: path.Dir(rel), opaque: true})
		case strings.HasPrefix(base, whiteoutPrefix+whiteoutPrefix):
			// other AUFS metadata (.wh..wh.plnk, ...): nothing to apply
		case strings.HasPrefix(base, whiteoutPrefix):
			name := strings.TrimPrefix(base, whiteoutPrefix)
			if name == "" || name == "." || name == ".." {
				return nil, fmt.Errorf("%w: whiteout %q names no entry of its directory", ErrUnsafePath, h.Name)
			}
			list = append(list, whiteout{dir: path.Dir(rel), name: name})
		}
	}
}

// applyWhiteouts applies a layer's deletions, without following links.
func (a *applier) applyWhiteouts(list []whiteout) error {
	for _, w := range list {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		if w.opaque {
			if err := a.clearDir(w.dir); err != nil {
				return err
			}
			continue
		}
		rel := path.Join(w.dir, w.name)
		ok, err := a.walkParents(rel, false)
		if err != nil || !ok {
			return err
		}
		p := filepath.Join(a.root, rel)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if err := a.remove(p, fi, true); err != nil {
			return fmt.Errorf("whiteout %s: %w", rel, err)
		}
	}
	return nil
}

// clearDir empties a directory for an opaque whiteout: what lower layers
// put there is hidden; the layer's own entries are extracted afterwards.
func (a *applier) clearDir(rel string) error {
	if rel == "." {
		rel = ""
	}
	if rel != "" {
		ok, err := a.walkParents(rel, false)
		if err != nil || !ok {
			return err
		}
	}
	p := filepath.Join(a.root, rel)
	fi, err := os.Lstat(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("%w: opaque directory %q is a link", ErrUnsafePath, rel)
	}
	if !fi.IsDir() {
		return nil
	}
	ents, err := os.ReadDir(p)
	if err != nil {
		return err
	}
	for _, e := range ents {
		c := filepath.Join(p, e.Name())
		ci, err := os.Lstat(c)
		if err != nil {
			return err
		}
		if err := a.remove(c, ci, true); err != nil {
			return fmt.Errorf("opaque whiteout of %s: %w", rel, err)
		}
	}
	return nil
}

func (a *applier) extract(r io.Reader) error {
	tr := tar.NewReader(r)
	buf := make([]byte, 1<<20)
	for {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read layer: %w", err)
		}
		rel, err := cleanName(h.Name)
		if err != nil {
			return err
		}
		if strings.HasPrefix(path.Base(rel), whiteoutPrefix) {
			continue
		}
		if err := a.entry(h, rel, tr, buf); err != nil {
			return fmt.Errorf("layer entry %q: %w", h.Name, err)
		}
	}
	// Directories last, deepest first, so their modes (perhaps read-only)
	// and times hold after their contents were written.
	// A later entry may have replaced a directory, or one above it, with
	// a link: chmod and chtimes follow links, so what is no longer there
	// is passed over.
	for i := len(a.dirs) - 1; i >= 0; i-- {
		d := a.dirs[i]
		if fi, ok := a.reachable(d.path); !ok || !fi.IsDir() {
			continue
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return err
		}
		if err := os.Chtimes(d.path, d.mtime, d.mtime); err != nil {
			return err
		}
	}
	for _, f := range a.fflags {
		if _, ok := a.reachable(f[0]); !ok {
			continue
		}
		if err := a.o.Flags.Set(a.ctx, f[0], f[1]); err != nil {
			return fmt.Errorf("set file flags %s on %s: %w", f[1], f[0], err)
		}
	}
	return nil
}

func (a *applier) entry(h *tar.Header, rel string, body io.Reader, buf []byte) error {
	if rel == "" {
		// The root itself: only its mode and times.
		if h.Typeflag == tar.TypeDir {
			a.dirs = append(a.dirs, dirMeta{path: a.root, mode: h.FileInfo().Mode().Perm() | h.FileInfo().Mode()&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky), mtime: h.ModTime})
			return a.owner(a.root, h)
		}
		return fmt.Errorf("the layer root must be a directory")
	}
	if _, err := a.walkParents(rel, true); err != nil {
		return err
	}
	p := filepath.Join(a.root, rel)
	fi, err := os.Lstat(p)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	mode := h.FileInfo().Mode()
	perm := mode.Perm() | mode&(os.ModeSetuid|os.ModeSetgid|os.ModeSticky)

	if exists && !(h.Typeflag == tar.TypeDir && fi.IsDir()) {
		if err := a.remove(p, fi, false); err != nil {
			return err
		}
	}
	switch h.Typeflag {
	case tar.TypeDir:
		if !exists || !fi.IsDir() {
			if err := os.Mkdir(p, 0o700); err != nil {
				return err
			}
		} else if a.o.Flags != nil && hasFlags(fi) {
			if err := a.o.Flags.Clear(a.ctx, p, false); err != nil {
				return err
			}
		}
		a.dirs = append(a.dirs, dirMeta{path: p, mode: perm, mtime: h.ModTime})
		if err := a.owner(p, h); err != nil {
			return err
		}
	case tar.TypeReg, tar.TypeRegA:
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return err
		}
		if a.src != nil && !sparse(h) {
			err = a.src.copyBody(f, h.Size)
		} else {
			_, err = io.CopyBuffer(f, body, buf)
		}
		if err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
		if err := a.owner(p, h); err != nil {
			return err
		}
		// chmod after chown: chown clears setuid bits.
		if err := os.Chmod(p, perm); err != nil {
			return err
		}
		if err := os.Chtimes(p, h.ModTime, h.ModTime); err != nil {
			return err
		}
	case tar.TypeSymlink:
		if err := os.Symlink(h.Linkname, p); err != nil {
			return err
		}
		if err := a.owner(p, h); err != nil {
			return err
		}
		ts := []unix.Timespec{unix.NsecToTimespec(h.ModTime.UnixNano()), unix.NsecToTimespec(h.ModTime.UnixNano())}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			a.warnOnce("lutimes", "cannot set times of links", "err", err)
		}
	case tar.TypeLink:
		target, err := cleanName(h.Linkname)
		if err != nil {
			return err
		}
		ok, err := a.walkParents(target, false)
		if err != nil {
			return err
		}
		tp := filepath.Join(a.root, target)
		ti, err := os.Lstat(tp)
		if !ok || err != nil {
			return fmt.Errorf("hard link to %q: target missing", h.Linkname)
		}
		if ti.IsDir() {
			return fmt.Errorf("hard link to directory %q", h.Linkname)
		}
		if err := os.Link(tp, p); err != nil {
			return err
		}
		return nil // a hard link shares its target's owner, mode and flags
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		if !a.o.Owners {
			a.warnOnce("mknod", "device nodes and fifos skipped: not running as root")
			return nil
		}
		m := uint32(perm.Perm())
		switch h.Typeflag {
		case tar.TypeChar:
			m |= unix.S_IFCHR
		case tar.TypeBlock:
			m |= unix.S_IFBLK
		default:
			m |= unix.S_IFIFO
		}
		if err := mknod(p, m, h.Devmajor, h.Devminor); err != nil {
			return err
		}
		if err := a.owner(p, h); err != nil {
			return err
		}
		if err := os.Chmod(p, perm); err != nil {
			return err
		}
	default:
		a.warnOnce(fmt.Sprintf("type%c", h.Typeflag), "layer entry type not extracted", "type", string(h.Typeflag), "name", h.Name)
		return nil
	}
	a.xattrs(p, h)
	if fl := h.PAXRecords[paxFlags]; fl != "" && a.o.Flags != nil {
		a.fflags = append(a.fflags, [2]string{p, fl})
	}
	return nil
}

// owner sets the numeric owner, without following links, when allowed.
func (a *applier) owner(p string, h *tar.Header) error {
	if !a.o.Owners {
		return nil
	}
	return os.Lchown(p, h.Uid, h.Gid)
}

// xattrs sets extended attributes where the file system takes them; a
// refusal is logged once rather than failing the layer.
func (a *applier) xattrs(p string, h *tar.Header) {
	for k, v := range h.PAXRecords {
		name, ok := strings.CutPrefix(k, paxXattrPrefix)
		if !ok {
			continue
		}
		if err := unix.Lsetxattr(p, name, []byte(v), 0); err != nil {
			a.warnOnce("xattr:"+name, "extended attribute not set", "name", name, "err", err)
		}
	}
}
