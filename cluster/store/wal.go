package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// walLog is raft's LogStore as append-only segment files: appending a
// batch is one write and one fdatasync, where a bbolt transaction costs
// two fsyncs and rewrites whole pages (measured on the lab disk: about
// 0.17 ms against 0.4 ms, and the log append is twice on the path of every
// write of a three-manager cluster).
//
// A segment is named after the index of its first entry. A record is its
// payload's length and CRC-32C (4 bytes each, big endian), then the
// payload: the entry's index (8 bytes) and the entry as encodeLog writes
// it. Zeros follow the last record (see segment.zeroed). Opening reads
// every segment: zeros end it; a bad record (cut short or failing its
// checksum) with no whole record after it ends the last segment (a crash
// during an append, which raft never acknowledged); both are cut off, a
// torn append with a warning. Any other damage, a bad record with good
// ones after it among them, refuses to open: those later entries may have
// been acknowledged.
//
// A full disk: raft makes a leader whose append fails step down, so the
// log keeps room ahead of its appends (made early, kept through failed
// appends, restarts and segment changes) and, once making more fails,
// says it is full (room) so the leader proposes no client writes while
// raft's own small entries still land. On ZFS, copy-on-write, zeros
// written ahead reserve nothing; there making room only finds out early
// that space is short.
type walLog struct {
	dir    string
	log    *slog.Logger
	segMax int64 // a segment takes no more appends once this long

	// change serialises appends and deletions; mu guards what readers
	// see, so an append's write and fdatasync do not hold them up.
	change sync.Mutex
	mu     sync.RWMutex
	segs   []*segment // oldest first; the last takes the appends
	first  uint64     // 0 when the log is empty
	last   uint64

	// writeAt writes to a segment file (tests make it refuse room, as a
	// full disk does).
	writeAt func(f *os.File, b []byte, off int64) (int, error)
	// sync makes an append durable (tests hold it to see what queues
	// behind it). Changed only under change.
	sync func(f *os.File) error
	// full is set while making room ahead of the appends fails: client
	// writes are refused (see room) so that the reserve left goes to
	// raft's own small entries and the leader never fails an append.
	full atomic.Pointer[LogFullError]
	// ahead is the room after the tail's last record, for room to check
	// without waiting for an append in progress.
	ahead atomic.Int64
	// zeros is what extend writes ahead, kept for the next time (only
	// ever zeros; used under change).
	zeros []byte
	// records is the buffer an append encodes its records in, kept for
	// the next when no larger than walKeepRecords (used under change):
	// a new one each time was a twentieth of a busy leader's allocation.
	records []byte
	// appends and appended count StoreLogs calls that reached the disk
	// (each one fdatasync) and the entries they carried: their ratio is
	// how well concurrent writes share a sync.
	appends, appended atomic.Uint64
}

type segment struct {
	base uint64
	f    *os.File
	offs []int64 // offs[i] is where entry base+i starts
	size int64   // where the next record goes
	// zeroed is where the zeros written ahead of the appends end (the
	// file's length). Appending into blocks the file already has makes
	// fdatasync flush data only; growing the file at every append made
	// each one a filesystem journal commit, which three managers (and
	// the bbolt file) on one disk queue behind each other.
	zeroed int64
}

var _ raft.LogStore = (*walLog)(nil)
var _ raft.MonotonicLogStore = (*walLog)(nil)

// walKeepRecords is the largest append buffer kept for the next append:
// a busy leader's appends are tens of kilobytes; a rare large one is not
// held on to.
const walKeepRecords = 1 << 20

const (
	walSuffix     = ".wal"
	walSegmentMax = 16 << 20
	walHeader     = 8
	walMaxRecord  = 1 << 30
	walZeroChunk  = 1 << 20 // how far ahead of the appends zeros go
	// walReserve is the room an append leaves ahead at least, or else
	// makes more: when making more fails, what is left still takes
	// thousands of raft's own entries (an election's no-op, a
	// configuration, a read barrier; each well under 1 KiB) and the
	// client writes already on their way.
	walReserve = 256 << 10
	// walRecordExtra is what a record adds to a command's bytes: the
	// header, the index and encodeLog's fields.
	walRecordExtra = walHeader + 8 + 21
)

// ErrLogFull: the raft log's disk has no room for more entries; client
// writes are refused until space is freed, reads go on.
var ErrLogFull = errors.New("raft log disk full")

// LogFullError says which log ran out of room and why. It matches
// ErrLogFull and the file system's error (syscall.ENOSPC, EDQUOT).
type LogFullError struct {
	Dir string
	Err error
}

func (e *LogFullError) Error() string {
	return fmt.Sprintf("%s: the raft log in %s has no room for more entries (%v); writes are refused until space is freed on its disk, reads go on",
		ErrLogFull, e.Dir, e.Err)
}

func (e *LogFullError) Unwrap() []error { return []error{ErrLogFull, e.Err} }

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// IsMonotonic tells raft the log holds no gaps: after installing a
// snapshot raft deletes the whole log rather than leaving entries from
// before it.
func (w *walLog) IsMonotonic() bool { return true }

func openWAL(dir string, log *slog.Logger) (*walLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	var bases []uint64
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), walSuffix)
		if !ok {
			continue
		}
		b, err := strconv.ParseUint(name, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("raft log: %s: not a segment name (its first index, then %s)", e.Name(), walSuffix)
		}
		bases = append(bases, b)
	}
	slices.Sort(bases)
	w := &walLog{dir: dir, log: log, segMax: walSegmentMax, writeAt: (*os.File).WriteAt, sync: datasync}
	for i, b := range bases {
		// Appends, truncations and removals never leave a gap.
		if w.last != 0 && b != w.last+1 {
			w.Close()
			return nil, fmt.Errorf("raft log: %s: segment starts at entry %d, the one before ends at %d", dir, b, w.last)
		}
		s, err := w.loadSegment(b, i == len(bases)-1)
		if err != nil {
			w.Close()
			return nil, err
		}
		if len(s.offs) == 0 && i < len(bases)-1 {
			// A segment created for an append that never landed.
			s.f.Close()
			if err := os.Remove(w.segPath(b)); err != nil {
				w.Close()
				return nil, fmt.Errorf("raft log: %w", err)
			}
			continue
		}
		w.segs = append(w.segs, s)
		if len(s.offs) > 0 {
			if w.first == 0 {
				w.first = s.base
			}
			w.last = s.base + uint64(len(s.offs)) - 1
		}
	}
	w.noteAhead()
	return w, nil
}

// noteAhead records the room after the tail's last record.
func (w *walLog) noteAhead() {
	var n int64
	if t := w.tail(); t != nil {
		n = t.zeroed - t.size
	}
	w.ahead.Store(n)
}

func (w *walLog) segPath(base uint64) string {
	return filepath.Join(w.dir, fmt.Sprintf("%020d%s", base, walSuffix))
}

// loadSegment reads a segment's records, cutting a torn end off the last
// one.
func (w *walLog) loadSegment(base uint64, last bool) (*segment, error) {
	path := w.segPath(base)
	name := filepath.Base(path)
	f, err := os.OpenFile(path, os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("raft log: reading %s: %w", path, err)
	}
	s := &segment{base: base, f: f}
	var off int64
	for off < int64(len(data)) {
		want := base + uint64(len(s.offs))
		payload, err := walRecord(data[off:], want)
		var wrong *wrongEntryError
		if errors.As(err, &wrong) {
			f.Close()
			return nil, fmt.Errorf("raft log: %s at byte %d: %w; %s", path, off, err, walDamageHelp)
		}
		if err != nil {
			rest := data[off:]
			zeros := !slices.ContainsFunc(rest, func(b byte) bool { return b != 0 })
			// Zeros are what was written ahead of the appends. Anything
			// else can only be the last append, torn by a crash: in an
			// older segment, or with a whole record after it, it is
			// damage.
			if !last && !zeros {
				f.Close()
				return nil, fmt.Errorf("raft log: %s: bad record at byte %d (entry %d: %w) in a segment that is not the last; %s",
					path, off, want, err, walDamageHelp)
			}
			if at, idx, ok := nextRecord(data, off+1, want); ok {
				f.Close()
				return nil, fmt.Errorf("raft log: %s: bad record at byte %d (entry %d: %w) with whole entry %d at byte %d after it: damage, not a torn append; %s",
					path, off, want, err, idx, at, walDamageHelp)
			}
			if !zeros {
				w.log.Warn("raft log: cutting off a torn append (a crash during a write raft never acknowledged)",
					"segment", name, "byte", off, "entry", want, "cut_bytes", len(rest), "reason", err.Error())
			}
			if last && (zeros || w.zeroOut(f, off, int64(len(rest))) == nil) {
				// The last segment keeps its room ahead (a restart on a
				// full disk must not give it up); zeros never read as a
				// record.
				s.size, s.zeroed = off, int64(len(data))
				return s, nil
			}
			// An older segment ends at its last record.
			if err := f.Truncate(off); err != nil {
				f.Close()
				return nil, fmt.Errorf("raft log: cutting the torn end off %s: %w", path, err)
			}
			if err := datasync(f); err != nil {
				f.Close()
				return nil, fmt.Errorf("raft log: %w", err)
			}
			break
		}
		s.offs = append(s.offs, off)
		off += walHeader + int64(len(payload))
	}
	s.size, s.zeroed = off, off
	return s, nil
}

// walDamageHelp is what to do about a damaged log.
const walDamageHelp = "the log is damaged: restore this manager from a backup, or remove its data directory and join it to the cluster again from empty"

// nextRecord looks for a whole record holding entry want or a later one
// anywhere in data from byte from on. A bad record followed by one is
// damage in the middle of the log, not a torn end.
func nextRecord(data []byte, from int64, want uint64) (at int64, index uint64, ok bool) {
	for p := from; p+walHeader+8 <= int64(len(data)); p++ {
		n := int64(binary.BigEndian.Uint32(data[p:]))
		if n < 8 || n > walMaxRecord || p+walHeader+n > int64(len(data)) {
			continue
		}
		idx := binary.BigEndian.Uint64(data[p+walHeader:])
		if idx < want || idx-want > uint64(len(data)) {
			continue
		}
		if payload, err := walRecord(data[p:], idx); err == nil && len(payload) > 0 {
			return p, idx, true
		}
	}
	return 0, 0, false
}

// walRecord checks the record at the start of b, which should hold entry
// index, and returns its payload.
func walRecord(b []byte, index uint64) ([]byte, error) {
	if len(b) < walHeader {
		return nil, errors.New("record header cut short")
	}
	n := binary.BigEndian.Uint32(b)
	if n < 8 || n > walMaxRecord || int64(n) > int64(len(b)-walHeader) {
		return nil, fmt.Errorf("record of %d bytes cut short or impossible", n)
	}
	payload := b[walHeader : walHeader+int(n)]
	if crc32.Checksum(payload, crcTable) != binary.BigEndian.Uint32(b[4:]) {
		return nil, errors.New("record checksum mismatch")
	}
	if got := binary.BigEndian.Uint64(payload); got != index {
		return nil, &wrongEntryError{got, index}
	}
	return payload, nil
}

// wrongEntryError is a whole record in the wrong place: damage, not a
// torn append.
type wrongEntryError struct{ got, want uint64 }

func (e *wrongEntryError) Error() string {
	return fmt.Sprintf("record holds entry %d, want %d", e.got, e.want)
}

func appendRecord(buf []byte, l *raft.Log) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, walHeader)...)
	buf = binary.BigEndian.AppendUint64(buf, l.Index)
	buf = appendLog(buf, l)
	payload := buf[start+walHeader:]
	binary.BigEndian.PutUint32(buf[start:], uint32(len(payload)))
	binary.BigEndian.PutUint32(buf[start+4:], crc32.Checksum(payload, crcTable))
	return buf
}

func (w *walLog) FirstIndex() (uint64, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.first, nil
}

func (w *walLog) LastIndex() (uint64, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.last, nil
}

func (w *walLog) GetLog(index uint64, l *raft.Log) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.first == 0 || index < w.first || index > w.last {
		return raft.ErrLogNotFound
	}
	i, found := slices.BinarySearchFunc(w.segs, index, func(s *segment, idx uint64) int {
		switch {
		case s.base > idx:
			return 1
		case s.base+uint64(len(s.offs)) <= idx:
			return -1
		}
		return 0
	})
	if !found {
		return raft.ErrLogNotFound
	}
	s := w.segs[i]
	k := index - s.base
	end := s.size
	if int(k)+1 < len(s.offs) {
		end = s.offs[k+1]
	}
	buf := make([]byte, end-s.offs[k])
	if _, err := s.f.ReadAt(buf, s.offs[k]); err != nil {
		return fmt.Errorf("raft log: reading entry %d: %w", index, err)
	}
	payload, err := walRecord(buf, index)
	if err != nil {
		return fmt.Errorf("raft log: entry %d: %w", index, err)
	}
	return decodeLog(payload[8:], index, l)
}

func (w *walLog) StoreLog(l *raft.Log) error { return w.StoreLogs([]*raft.Log{l}) }

// StoreLogs appends entries that follow on from the last one, in one
// write and one fdatasync.
func (w *walLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	w.change.Lock()
	defer w.change.Unlock()
	for i, l := range logs[1:] {
		if l.Index != logs[i].Index+1 {
			return fmt.Errorf("raft log: entries %d and %d do not follow on", logs[i].Index, l.Index)
		}
	}
	next := logs[0].Index
	switch {
	case w.last != 0 && next <= w.last:
		return fmt.Errorf("raft log: appending entry %d over the log's last %d", next, w.last)
	case w.last != 0 && next > w.last+1:
		// Only after a snapshot install that deleted the log and was
		// interrupted: what is left is from before the snapshot.
		w.mu.Lock()
		err := w.removeAll()
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
	s, err := w.appendSegment(next, logs)
	if err != nil {
		return err
	}
	// Readers only read below s.size, which moves once the records are
	// durable.
	buf := w.records[:0]
	if n := walRecordsLen(logs); cap(buf) < n {
		buf = make([]byte, 0, n)
	}
	defer func() {
		if cap(buf) <= walKeepRecords {
			w.records = buf[:0]
		}
	}()
	offs := make([]int64, 0, len(logs))
	for _, l := range logs {
		offs = append(offs, s.size+int64(len(buf)))
		buf = appendRecord(buf, l)
	}
	end := s.size + int64(len(buf))
	if end+walReserve > s.zeroed {
		// Making room early means it fails while some is left, which
		// this append may still use.
		if err := w.extend(s, end); err != nil && end > s.zeroed {
			return fmt.Errorf("appending entries %d to %d (%d bytes, %d left ahead): %w",
				next, logs[len(logs)-1].Index, len(buf), s.zeroed-s.size, err)
		}
	}
	fail := func(what string, err error) error {
		// The write may or may not have reached the disk: clear it so the
		// file and memory agree, keeping the room ahead.
		if zerr := w.zeroOut(s.f, s.size, int64(len(buf))); zerr != nil {
			_ = s.f.Truncate(s.size)
			s.zeroed = s.size
		}
		return fmt.Errorf("raft log: %s entries %d to %d: %w", what, next, logs[len(logs)-1].Index, err)
	}
	if _, err := w.writeAt(s.f, buf, s.size); err != nil {
		return fail("appending", err)
	}
	if err := w.sync(s.f); err != nil {
		return fail("syncing", err)
	}
	w.mu.Lock()
	s.offs = append(s.offs, offs...)
	s.size += int64(len(buf))
	if w.first == 0 {
		w.first = next
	}
	w.last = logs[len(logs)-1].Index
	w.mu.Unlock()
	w.noteAhead()
	w.appends.Add(1)
	w.appended.Add(uint64(len(logs)))
	return nil
}

func (w *walLog) tail() *segment {
	if len(w.segs) == 0 {
		return nil
	}
	return w.segs[len(w.segs)-1]
}

// appendSegment returns the segment that takes the append of logs, from
// entry next on, starting a new one when needed. A segment past segMax
// takes more while the disk has no room for a new one.
func (w *walLog) appendSegment(next uint64, logs []*raft.Log) (*segment, error) {
	t := w.tail()
	switch {
	case t != nil && len(t.offs) == 0 && t.base != next:
		// An empty tail for other entries: renaming it keeps its room.
		if err := os.Rename(w.segPath(t.base), w.segPath(next)); err != nil {
			return nil, fmt.Errorf("raft log: %w", err)
		}
		if err := syncDir(w.dir); err != nil {
			return nil, err
		}
		w.mu.Lock()
		t.base = next
		w.mu.Unlock()
		return t, nil
	case t != nil && t.size < w.segMax:
		return t, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s, err := w.newSegment(next)
	if err != nil && t != nil && errors.Is(err, ErrLogFull) && t.size+int64(walRecordsLen(logs)) <= t.zeroed {
		return t, nil
	}
	return s, err
}

// walRecordsLen is how many bytes the records of logs take.
func walRecordsLen(logs []*raft.Log) int {
	n := 0
	for _, l := range logs {
		n += walHeader + 8 + encodedLogLen(l)
	}
	return n
}

// newSegment starts a segment for entries from base after the tail (which
// holds entries). It makes the new file's room first: on a full disk the
// tail keeps its own and the new file goes again.
func (w *walLog) newSegment(base uint64) (*segment, error) {
	path := w.segPath(base)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	s := &segment{base: base, f: f}
	if err := w.extend(s, 0); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, fmt.Errorf("raft log: starting segment %s: %w", filepath.Base(path), err)
	}
	if err := syncDir(w.dir); err != nil {
		f.Close()
		return nil, err
	}
	// A segment that takes no more appends ends at its last record: only
	// the last one may end in zeros (opening reads them as its end).
	if t := w.tail(); t != nil && t.zeroed > t.size {
		if err := t.f.Truncate(t.size); err != nil {
			f.Close()
			return nil, fmt.Errorf("raft log: closing a segment: %w", err)
		}
		if err := datasync(t.f); err != nil {
			f.Close()
			return nil, fmt.Errorf("raft log: closing a segment: %w", err)
		}
		t.zeroed = t.size
	}
	w.segs = append(w.segs, s)
	w.noteAhead()
	return s, nil
}

// extend writes zeros ahead of s's appends to walZeroChunk past end. On
// failure the log is marked full (client writes are refused) and the
// error says so; success clears the mark. Callers hold w.change.
func (w *walLog) extend(s *segment, end int64) error {
	if to := end + walZeroChunk; to > s.zeroed {
		if int64(len(w.zeros)) < to-s.zeroed {
			w.zeros = make([]byte, to-s.zeroed)
		}
		n, err := w.writeAt(s.f, w.zeros[:to-s.zeroed], s.zeroed)
		s.zeroed += int64(n)
		if err != nil {
			full := &LogFullError{Dir: w.dir, Err: err}
			if w.full.Swap(full) == nil {
				w.log.Warn("raft log: no room for more entries; refusing writes until space is freed",
					"dir", w.dir, "room_left", max(0, s.zeroed-end), "error", err.Error())
			}
			return full
		}
	}
	if w.full.Swap(nil) != nil {
		w.log.Info("raft log: room for entries again; writes are taken", "dir", w.dir)
	}
	return nil
}

// room says whether an entry of n command bytes may be proposed: nil when
// the log is not full and has room for it and its reserve; otherwise it
// tries to make room (space may have been freed) and returns the full
// log's error if that fails. Checking before proposing matters: an
// append that fails makes the leader step down.
func (w *walLog) room(n int) error {
	need := int64(n) + walRecordExtra
	if w.full.Load() == nil && w.ahead.Load() >= need+walReserve {
		return nil
	}
	w.change.Lock()
	defer w.change.Unlock()
	s := w.tail()
	if s == nil {
		return nil
	}
	if err := w.extend(s, s.size+need); err != nil {
		return err
	}
	if s == w.tail() {
		w.noteAhead()
	}
	return nil
}

// zeroOut overwrites n bytes of f at off with zeros, durably: blocks the
// file has already, so no new space is needed.
func (w *walLog) zeroOut(f *os.File, off, n int64) error {
	if n == 0 {
		return nil
	}
	if _, err := w.writeAt(f, make([]byte, n), off); err != nil {
		return err
	}
	return datasync(f)
}

// DeleteRange removes entries min to max. Raft removes either a head of
// the log (compaction after a snapshot) or a tail (entries a new leader
// does not have), never a middle.
func (w *walLog) DeleteRange(min, max uint64) error {
	w.change.Lock()
	defer w.change.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.first == 0 || max < w.first || min > w.last || min > max {
		return nil
	}
	switch {
	case min <= w.first && max >= w.last:
		return w.removeAll()
	case min <= w.first:
		return w.removeHead(max)
	case max >= w.last:
		return w.removeTail(min)
	}
	return fmt.Errorf("raft log: deleting entries %d to %d from the middle of %d to %d", min, max, w.first, w.last)
}

// removeAll deletes every segment, newest first, so an interruption
// leaves a log that still starts where it did.
func (w *walLog) removeAll() error {
	for len(w.segs) > 0 {
		s := w.tail()
		s.f.Close()
		if err := os.Remove(w.segPath(s.base)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raft log: %w", err)
		}
		w.segs = w.segs[:len(w.segs)-1]
	}
	w.first, w.last = 0, 0
	w.noteAhead()
	return syncDir(w.dir)
}

// removeHead drops the segments holding only entries up to max. The
// entries up to max in the segment that also holds later ones stay on
// disk (so FirstIndex is lower again after a restart, which raft
// tolerates) but are no longer served.
func (w *walLog) removeHead(max uint64) error {
	for len(w.segs) > 1 {
		s := w.segs[0]
		if s.base+uint64(len(s.offs))-1 > max {
			break
		}
		s.f.Close()
		if err := os.Remove(w.segPath(s.base)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raft log: %w", err)
		}
		w.segs = w.segs[1:]
	}
	w.first = max + 1
	return syncDir(w.dir)
}

// removeTail cuts the log back to end before min: later segments go,
// newest first, then the one holding min is truncated.
func (w *walLog) removeTail(min uint64) error {
	for {
		s := w.tail()
		if s.base < min {
			break
		}
		s.f.Close()
		if err := os.Remove(w.segPath(s.base)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("raft log: %w", err)
		}
		w.segs = w.segs[:len(w.segs)-1]
	}
	if err := syncDir(w.dir); err != nil {
		return err
	}
	s := w.tail()
	k := min - s.base
	if k >= uint64(len(s.offs)) {
		w.last = min - 1
		return nil
	}
	// Zeros over the cut entries keep the room they took; truncating
	// (which needs no room at all) is the way out if that fails.
	if err := w.zeroOut(s.f, s.offs[k], s.size-s.offs[k]); err != nil {
		if err := s.f.Truncate(s.offs[k]); err != nil {
			return fmt.Errorf("raft log: cutting entries from %d: %w", min, err)
		}
		if err := datasync(s.f); err != nil {
			return fmt.Errorf("raft log: cutting entries from %d: %w", min, err)
		}
		s.zeroed = s.offs[k]
	}
	s.size = s.offs[k]
	s.offs = s.offs[:k]
	w.last = min - 1
	w.noteAhead()
	return nil
}

// Close closes the segment files.
func (w *walLog) Close() error {
	w.change.Lock()
	defer w.change.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	var first error
	for _, s := range w.segs {
		if err := s.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	w.segs = nil
	return first
}

// syncDir makes the creation or removal of files in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("raft log: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("raft log: syncing %s: %w", dir, err)
	}
	return nil
}
