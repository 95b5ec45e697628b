package volumes

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"
)

// A directory stream is a tar archive: streamHead as meta/stream.json,
// then the snapshot's entries under data/ (parents before children), then
// streamEnd as meta/end.json. The end record is how a receiver tells a
// whole stream from one cut short at an entry's boundary, which tar alone
// cannot. An incremental stream (From set) holds every directory, the
// other entries that differ from From, and in its end record the paths of
// all entries, so the receiver removes what is gone.
const (
	streamFormat = "legion-dir/1"
	headName     = "meta/stream.json"
	endName      = "meta/end.json"
	dataPrefix   = "data"
	// maxHeadRecord and maxEndRecord bound the JSON records read from a
	// stream (the end record lists every path of an incremental).
	maxHeadRecord = 1 << 16
	maxEndRecord  = 1 << 30
	// streamBufSize buffers the stream and each file's copy.
	streamBufSize = 1 << 20
)

type streamHead struct {
	Format string `json:"format"`
	Snap   string `json:"snap"`
	From   string `json:"from,omitempty"`
}

type streamEnd struct {
	Entries int      `json:"entries"`
	Paths   []string `json:"paths,omitempty"`
}

func tarName(rel string) string {
	if rel == "." {
		return dataPrefix
	}
	return dataPrefix + "/" + rel
}

// tarMode is a file mode as tar keeps it: permissions and set-id bits.
func tarMode(m fs.FileMode) int64 {
	out := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		out |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		out |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		out |= 0o1000
	}
	return out
}

func writeRecord(tw *tar.Writer, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(b)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err = tw.Write(b)
	return err
}

// same says whether an entry is unchanged since from, by type, mode,
// owner, size, modification time and link target, as rsync judges by
// default: content rewritten with its size and time put back is missed.
func same(a, b entry) bool {
	return a.mode == b.mode && a.uid == b.uid && a.gid == b.gid && a.size == b.size &&
		a.mtime.Equal(b.mtime) && a.link == b.link
}

// Send implements Store.
func (d *Dir) Send(ctx context.Context, namespace, name, snap, from string, w io.Writer) error {
	if err := checkName(namespace, name); err != nil {
		return err
	}
	if err := checkSnap("snapshot", snap); err != nil {
		return err
	}
	if from != "" {
		if err := checkSnap("from", from); err != nil {
			return err
		}
	}
	vdir := d.volDir(namespace, name)
	unlock := d.lock(namespace, name)
	m, err := readMeta(vdir)
	live := err == nil && isMove(snap) && !slices.Contains(m.Snapshots, snap)
	if err == nil && !live {
		err = d.snapshot(namespace, name, snap)
		if err == nil {
			m, err = readMeta(vdir)
		}
	}
	unlock()
	if err != nil {
		return err
	}
	if !live && !slices.Contains(m.Snapshots, snap) {
		return fmt.Errorf("volume %s/%s: snapshot %s: no copy on this node to send from: %w", namespace, name, snap, ErrNoSnapshot)
	}
	var base func(rel string) (entry, bool)
	switch {
	case from == "":
	case slices.Contains(m.Snapshots, from):
		fromDir := filepath.Join(vdir, snapshotsSub, from)
		base = func(rel string) (entry, bool) {
			old, err := statEntry(fromDir, rel)
			return old, err == nil
		}
	case slices.Contains(m.Manifests, from):
		sent, err := readManifest(vdir, from)
		if err != nil {
			return fmt.Errorf("volume %s/%s: %w", namespace, name, err)
		}
		base = func(rel string) (entry, bool) {
			old, ok := sent[rel]
			return old, ok
		}
	default:
		return fmt.Errorf("volume %s/%s: snapshot %s: no copy on this node to send from: %w", namespace, name, from, ErrNoSnapshot)
	}
	root := filepath.Join(vdir, snapshotsSub, snap)
	var sent *[]manifestEntry
	if live {
		root, sent = filepath.Join(vdir, dataSub), new([]manifestEntry)
	}
	if err := sendTree(ctx, root, base, sent, streamHead{Format: streamFormat, Snap: snap, From: from}, w); err != nil {
		return fmt.Errorf("volume %s/%s: send %s: %w", namespace, name, snap, err)
	}
	if !live {
		return nil
	}
	defer d.lock(namespace, name)()
	if err := writeManifest(vdir, snap, *sent); err != nil {
		return fmt.Errorf("volume %s/%s: snapshot %s: %w", namespace, name, snap, err)
	}
	if m, err = readMeta(vdir); err != nil {
		return err
	}
	if !slices.Contains(m.Manifests, snap) {
		m.Manifests = append(m.Manifests, snap)
		return writeMeta(vdir, m)
	}
	return nil
}

// sendTree streams the tree at root: everything, or with base only what
// differs from it. With sent it is live data (a migration's): a file
// written while it goes is sent as far as its size said and recorded as
// changed, so the next part sends it again.
func sendTree(ctx context.Context, root string, base func(rel string) (entry, bool), sent *[]manifestEntry, head streamHead, w io.Writer) error {
	bw := bufio.NewWriterSize(w, streamBufSize)
	tw := tar.NewWriter(bw)
	if err := writeRecord(tw, headName, head); err != nil {
		return err
	}
	buf := make([]byte, streamBufSize)
	var end streamEnd
	err := walk(root, func(e entry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if base != nil {
			end.Paths = append(end.Paths, e.rel)
			if !e.mode.IsDir() {
				if old, ok := base(e.rel); ok && same(old, e) {
					if sent != nil {
						*sent = append(*sent, manifestOf(e))
					}
					return nil
				}
			}
		}
		hdr := &tar.Header{Name: tarName(e.rel), Mode: tarMode(e.mode), Uid: e.uid, Gid: e.gid, ModTime: e.mtime, Format: tar.FormatPAX}
		switch t := e.mode.Type(); {
		case t == 0:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.size
		case t&fs.ModeDir != 0:
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case t&fs.ModeSymlink != 0:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.link
		case t&fs.ModeNamedPipe != 0:
			hdr.Typeflag = tar.TypeFifo
		default:
			return fmt.Errorf("%s: file type %v is not kept in a volume", e.rel, t)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		end.Entries++
		if hdr.Typeflag != tar.TypeReg {
			if sent != nil {
				*sent = append(*sent, manifestOf(e))
			}
			return nil
		}
		p := filepath.Join(root, filepath.FromSlash(e.rel))
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if sent == nil {
			// Hide WriteTo so the large buffer is used, not io.Copy's 32 KiB.
			n, err := io.CopyBuffer(tw, struct{ io.Reader }{f}, buf)
			if err == nil && n != e.size {
				err = fmt.Errorf("%s: changed size while sent (%d bytes, want %d)", e.rel, n, e.size)
			}
			return err
		}
		n, err := io.CopyBuffer(tw, io.LimitReader(f, e.size), buf)
		if err != nil {
			return err
		}
		rec := manifestOf(e)
		if n < e.size {
			// Cut while sent: the rest is zeros, and the file goes again.
			if _, err := io.CopyBuffer(tw, io.LimitReader(zeros{}, e.size-n), buf); err != nil {
				return err
			}
			rec.MTime = 0
		} else if now, err := statEntry(root, e.rel); err != nil || !same(now, e) {
			rec.MTime = 0
		}
		*sent = append(*sent, rec)
		return nil
	})
	if err != nil {
		return err
	}
	if err := writeRecord(tw, endName, end); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// Receive implements Store. A full stream is written into a work
// directory beside the volume and renamed into place once whole, so a
// stream cut short leaves whatever was there before. An incremental one
// is staged beside data/ and applied only once whole: the changed files
// are renamed in, then what the stream no longer lists is removed.
func (d *Dir) Receive(ctx context.Context, ref Ref, size int64, incremental bool, r io.Reader) error {
	return d.receive(ctx, ref, size, incremental, false, r)
}

// Restore implements Store.
func (d *Dir) Restore(ctx context.Context, ref Ref, size int64, r io.Reader) error {
	return d.receive(ctx, restoredRef(ref), size, false, true, r)
}

func (d *Dir) receive(ctx context.Context, ref Ref, size int64, incremental, restore bool, r io.Reader) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("volume %s/%s: size %d: must not be negative", ref.Namespace, ref.Name, size)
	}
	defer d.lock(ref.Namespace, ref.Name)()
	vdir := d.volDir(ref.Namespace, ref.Name)
	m, merr := readMeta(vdir)
	if incremental {
		if merr != nil {
			return fmt.Errorf("volume %s/%s: incremental stream without the full copy: %w", ref.Namespace, ref.Name, merr)
		}
		if err := m.checkUID(vdir, ref.UID); err != nil {
			return err
		}
		if err := d.receiveIncremental(ctx, vdir, m, r); err != nil {
			return fmt.Errorf("volume %s/%s: receive: %w", ref.Namespace, ref.Name, err)
		}
		return nil
	}
	if restore && !errors.Is(merr, ErrNoVolume) {
		return fmt.Errorf("volume %s/%s: directory %s: %w", ref.Namespace, ref.Name, vdir, ErrExists)
	}
	if err := os.MkdirAll(d.nsDir(ref.Namespace), 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(d.nsDir(ref.Namespace), tempName(ref.Name))
	err := d.receiveFull(ctx, tmp, ref, size, r)
	if err == nil && !restore {
		err = d.destroy(ref.Namespace, ref.Name) // a stale copy
	}
	if err == nil {
		// A restore racing a volume made meanwhile fails here: rename
		// does not replace a directory that is not empty.
		err = os.Rename(tmp, vdir)
		if err != nil && restore {
			err = fmt.Errorf("%w: %w", ErrExists, err)
		}
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("volume %s/%s: receive: %w", ref.Namespace, ref.Name, err)
	}
	return nil
}

func (d *Dir) receiveFull(ctx context.Context, tmp string, ref Ref, size int64, r io.Reader) error {
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return err
	}
	x := &extractor{root: filepath.Join(tmp, dataSub), buf: make([]byte, streamBufSize)}
	head, err := x.read(ctx, r, false)
	if err != nil {
		return err
	}
	if err := syncFS(tmp); err != nil {
		return fmt.Errorf("sync %s: %w", tmp, err)
	}
	return writeMeta(tmp, dirMeta{UID: ref.UID, Size: size, Received: []string{head.Snap}})
}

func (d *Dir) receiveIncremental(ctx context.Context, vdir string, m dirMeta, r io.Reader) error {
	if err := recoverData(vdir); err != nil {
		return err
	}
	staging := filepath.Join(vdir, tempName("recv"))
	if err := os.Mkdir(staging, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	x := &extractor{root: filepath.Join(staging, dataSub), buf: make([]byte, streamBufSize)}
	head, err := x.read(ctx, r, true)
	if err != nil {
		return err
	}
	if !slices.Contains(m.Received, head.From) && !slices.Contains(m.Snapshots, head.From) {
		return fmt.Errorf("incremental stream from %s, which this node does not hold: %w", head.From, ErrNoSnapshot)
	}
	data := filepath.Join(vdir, dataSub)
	for _, e := range x.got {
		if e.rel == "." {
			continue
		}
		target := filepath.Join(data, filepath.FromSlash(e.rel))
		fi, err := os.Lstat(target)
		if e.mode.IsDir() {
			if err == nil && fi.IsDir() {
				continue
			}
			if err == nil {
				if err := os.Remove(target); err != nil {
					return err
				}
			}
			if err := os.Mkdir(target, 0o700); err != nil {
				return err
			}
			continue
		}
		if err == nil && fi.IsDir() {
			if err := os.RemoveAll(target); err != nil {
				return err
			}
		}
		if err := os.Rename(filepath.Join(x.root, filepath.FromSlash(e.rel)), target); err != nil {
			return err
		}
	}
	keep := make(map[string]bool, len(x.end.Paths)+1)
	keep["."] = true
	for _, p := range x.end.Paths {
		keep[p] = true
	}
	err = filepath.WalkDir(data, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(data, p)
		if err != nil {
			return err
		}
		if keep[filepath.ToSlash(rel)] {
			return nil
		}
		if err := os.RemoveAll(p); err != nil {
			return err
		}
		if de.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := setDirMeta(data, x.dirs); err != nil {
		return err
	}
	if err := syncFS(vdir); err != nil {
		return fmt.Errorf("sync %s: %w", vdir, err)
	}
	if !slices.Contains(m.Received, head.Snap) {
		m.Received = append(m.Received, head.Snap)
	}
	return writeMeta(vdir, m)
}

// extractor writes a stream's entries below root.
type extractor struct {
	root string
	buf  []byte
	got  []entry // in stream order
	dirs []entry
	end  streamEnd
}

func readRecord(tr *tar.Reader, hdr *tar.Header, limit int64, v any) error {
	if hdr.Size > limit {
		return fmt.Errorf("%s: %d bytes, at most %d allowed", hdr.Name, hdr.Size, limit)
	}
	b, err := io.ReadAll(tr)
	if err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", hdr.Name, err)
	}
	return nil
}

// errCutShort: the stream ended before its end record.
var errCutShort = errors.New("stream cut short: it ended before its end record")

func (x *extractor) read(ctx context.Context, r io.Reader, incremental bool) (streamHead, error) {
	var head streamHead
	tr := tar.NewReader(bufio.NewReaderSize(r, streamBufSize))
	hdr, err := tr.Next()
	if err == io.EOF {
		return head, errCutShort
	}
	if err != nil {
		return head, err
	}
	if hdr.Name != headName {
		return head, fmt.Errorf("not a directory volume stream: first entry %q, want %s", hdr.Name, headName)
	}
	if err := readRecord(tr, hdr, maxHeadRecord, &head); err != nil {
		return head, err
	}
	if head.Format != streamFormat {
		return head, fmt.Errorf("%s: format %q, want %q", headName, head.Format, streamFormat)
	}
	if err := checkSnap(headName+": snap", head.Snap); err != nil {
		return head, err
	}
	switch {
	case incremental && head.From == "":
		return head, fmt.Errorf("a full stream (of %s) where an incremental one was expected", head.Snap)
	case !incremental && head.From != "":
		return head, fmt.Errorf("an incremental stream (from %s to %s) where a full one was expected", head.From, head.Snap)
	}
	dirs := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return head, err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			return head, errCutShort
		}
		if err != nil {
			return head, err
		}
		if hdr.Name == endName {
			if err := readRecord(tr, hdr, maxEndRecord, &x.end); err != nil {
				return head, err
			}
			if x.end.Entries != len(x.got) {
				return head, fmt.Errorf("%s: %d entries, the stream held %d", endName, x.end.Entries, len(x.got))
			}
			if _, err := tr.Next(); err != io.EOF {
				return head, fmt.Errorf("entries after %s", endName)
			}
			if err := setDirMeta(x.root, x.dirs); err != nil {
				return head, err
			}
			return head, nil
		}
		e, err := x.entryOf(hdr, dirs)
		if err != nil {
			return head, err
		}
		if err := makeEntry(filepath.Join(x.root, filepath.FromSlash(e.rel)), e, tr, x.buf); err != nil {
			return head, err
		}
		x.got = append(x.got, e)
		if e.mode.IsDir() {
			x.dirs = append(x.dirs, e)
			dirs[e.rel] = true
		}
	}
}

// entryOf checks a data entry and turns it into an entry. Each entry's
// parent must be a directory the stream made before it, so nothing is
// written through a symlink or outside root.
func (x *extractor) entryOf(hdr *tar.Header, dirs map[string]bool) (entry, error) {
	name := path.Clean(hdr.Name)
	rel := "."
	if name != dataPrefix {
		var ok bool
		if len(name) <= len(dataPrefix)+1 || name[:len(dataPrefix)+1] != dataPrefix+"/" {
			return entry{}, fmt.Errorf("entry %q: not below %s/", hdr.Name, dataPrefix)
		}
		rel = name[len(dataPrefix)+1:]
		if ok = filepath.IsLocal(rel); !ok {
			return entry{}, fmt.Errorf("entry %q: not a local path", hdr.Name)
		}
		if !dirs[path.Dir(rel)] {
			return entry{}, fmt.Errorf("entry %q: its directory was not in the stream before it", hdr.Name)
		}
	} else if hdr.Typeflag != tar.TypeDir {
		return entry{}, fmt.Errorf("entry %q: the root must be a directory", hdr.Name)
	}
	perm := fs.FileMode(hdr.Mode & 0o777)
	if hdr.Mode&0o4000 != 0 {
		perm |= fs.ModeSetuid
	}
	if hdr.Mode&0o2000 != 0 {
		perm |= fs.ModeSetgid
	}
	if hdr.Mode&0o1000 != 0 {
		perm |= fs.ModeSticky
	}
	e := entry{rel: rel, uid: hdr.Uid, gid: hdr.Gid, mtime: hdr.ModTime, size: hdr.Size, link: hdr.Linkname}
	switch hdr.Typeflag {
	case tar.TypeReg:
		e.mode = perm
	case tar.TypeDir:
		e.mode = perm | fs.ModeDir
	case tar.TypeSymlink:
		e.mode = perm | fs.ModeSymlink
	case tar.TypeFifo:
		e.mode = perm | fs.ModeNamedPipe
	default:
		return entry{}, fmt.Errorf("entry %q: tar type %q is not kept in a volume", hdr.Name, hdr.Typeflag)
	}
	if e.rel == "." && dirs["."] {
		return entry{}, fmt.Errorf("entry %q: the root twice", hdr.Name)
	}
	return e, nil
}

// zeros reads as endless zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
