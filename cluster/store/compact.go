package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bbolt reuses the pages it frees but never gives them back: a file that
// once held much more (a burst of objects since deleted, a large
// snapshot replaced by a smaller one) keeps its size for good. When a
// store opens and most of its file is free pages, it is rewritten
// without them first, as `bbolt compact` or etcd's defrag would, while
// nothing else reads or writes it.

// compactMinFree is how much free space makes a rewrite worth its time
// at open (it copies every live page, about a second per few hundred
// MB); the free pages must also be more than half the file.
var compactMinFree int64 = 64 << 20

// compactSuffix names the rewritten file until it replaces store.db.
const compactSuffix = ".compacting"

// compactTxSize is how much a rewrite copies per transaction.
const compactTxSize = 64 << 20

// openCompacted opens the bbolt file at path (openBolt) and, when its
// free pages are worth it (compactMinFree), first rewrites it without
// them. The copy replaces the file by a rename once it is on disk, while
// the old file is still open and locked, so a crash at any point leaves
// either file whole; a copy left by an interrupted rewrite is removed. A
// rewrite that cannot be made is logged and the file is used as it was.
func openCompacted(path string, log *slog.Logger) (*bolt.DB, error) {
	db, err := openBolt(path)
	if err != nil {
		return nil, err
	}
	replaced, err := compact(db, path, log)
	switch {
	case err != nil && replaced:
		log.Warn("the store file was compacted, but its directory could not be synced", "err", err)
	case err != nil:
		log.Warn("the store file was not compacted; it is used as it is", "err", err)
	}
	if !replaced {
		return db, nil
	}
	// The file at path is the copy now: open it in place of the old one.
	db.Close()
	return openBolt(path)
}

// compact rewrites the file db has open at path without its free pages,
// when they are more than half of it and at least compactMinFree, and
// reports whether the copy took the file's place.
func compact(db *bolt.DB, path string, log *slog.Logger) (replaced bool, err error) {
	tmp := path + compactSuffix
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("removing %s, left by an interrupted compaction: %w", tmp, err)
	}
	fi, err := os.Stat(path) // the file db has open: nothing else may replace it while db holds its lock
	if err != nil {
		return false, err
	}
	st := db.Stats()
	free := int64(st.FreePageN+st.PendingPageN) * int64(db.Info().PageSize)
	if free < compactMinFree || free*2 < fi.Size() {
		return false, nil
	}
	start := time.Now()
	if err := copyBolt(db, tmp); err != nil {
		_ = os.Remove(tmp)
		return false, fmt.Errorf("compacting %s (%d MB, %d MB of it free): %w", path, fi.Size()>>20, free>>20, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return false, fmt.Errorf("compacting %s: %w", path, err)
	}
	// The copy is in place from here on, whatever follows.
	if err := syncDir(filepath.Dir(path)); err != nil {
		return true, err
	}
	after := int64(0)
	if now, err := os.Stat(path); err == nil {
		after = now.Size()
	}
	log.Info("store file compacted: most of it was free pages", "file", path,
		"before_mb", fi.Size()>>20, "free_mb", free>>20, "after_mb", after>>20, "took", time.Since(start).Round(time.Millisecond))
	return true, nil
}

// copyBolt copies every bucket of src into a new file at path, on disk
// before it returns.
func copyBolt(src *bolt.DB, path string) error {
	// Not synced commit by commit: the copy is synced once, whole, before
	// anything relies on it.
	dst, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second, NoSync: true,
		FreelistType: bolt.FreelistMapType, NoFreelistSync: true})
	if err != nil {
		return err
	}
	if err := bolt.Compact(dst, src, compactTxSize); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
