package volumes

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MoveSnapshotPrefix starts the names of a migration's snapshots
// (legion-move-<n>-full and -last). On directories they are manifests,
// not copies: a move's full copy goes while the task runs and its last
// part once nothing uses the volume, and that last part alone makes the
// copy whole, so the full copy needs no instant of its own. Copying the
// whole volume aside first would write it twice on the sending node.
const MoveSnapshotPrefix = "legion-move-"

// manifestEntry is one sent file as a manifest keeps it.
type manifestEntry struct {
	Rel   string      `json:"rel"`
	Mode  fs.FileMode `json:"mode"`
	UID   int         `json:"uid"`
	GID   int         `json:"gid"`
	Size  int64       `json:"size,omitempty"`
	MTime int64       `json:"mtime"` // Unix ns; 0: changed while sent, so never the same
	Link  string      `json:"link,omitempty"`
}

func manifestOf(e entry) manifestEntry {
	return manifestEntry{Rel: e.rel, Mode: e.mode, UID: e.uid, GID: e.gid, Size: e.size, MTime: e.mtime.UnixNano(), Link: e.link}
}

func (m manifestEntry) entry() entry {
	e := entry{rel: m.Rel, mode: m.Mode, uid: m.UID, gid: m.GID, size: m.Size, link: m.Link}
	if m.MTime != 0 {
		e.mtime = time.Unix(0, m.MTime)
	}
	return e
}

func manifestPath(vdir, snap string) string {
	return filepath.Join(vdir, snapshotsSub, snap+".json")
}

func isMove(snap string) bool { return strings.HasPrefix(snap, MoveSnapshotPrefix) }

func readManifest(vdir, snap string) (map[string]entry, error) {
	data, err := os.ReadFile(manifestPath(vdir, snap))
	if err != nil {
		return nil, fmt.Errorf("manifest of snapshot %s: %w", snap, err)
	}
	var list []manifestEntry
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("manifest of snapshot %s: %w", snap, err)
	}
	out := make(map[string]entry, len(list))
	for _, m := range list {
		out[m.Rel] = m.entry()
	}
	return out, nil
}

// writeManifest keeps what was sent.
func writeManifest(vdir, snap string, list []manifestEntry) error {
	if err := os.MkdirAll(filepath.Join(vdir, snapshotsSub), 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(list)
	if err != nil {
		return err
	}
	return replaceFile(manifestPath(vdir, snap), data)
}
