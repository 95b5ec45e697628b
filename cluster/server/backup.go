package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
)

// BackupFormat names the control-state backup's format and version.
const BackupFormat = "legion-backup/1"

// BackupFile is a backup of the control state (3.7): every object,
// Secrets and join tokens among them, at one version, with the managers
// of the time and the protocol the cluster spoke. Managers' keys are not
// in it: <data-dir>/pki is kept beside it.
type BackupFile struct {
	Format   string            `json:"format"`
	Objects  []json.RawMessage `json:"objects"`
	Version  uint64            `json:"version"`
	Managers []BackupManager   `json:"managers"`
	Protocol int               `json:"protocol"`
	Time     time.Time         `json:"time"`
}

// BackupManager is a manager as the membership named it.
type BackupManager struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
}

// backupChunk is how much of the file goes in one message.
const backupChunk = 1 << 20

// chunkSender writes the backup file to the stream in chunks.
type chunkSender struct {
	buf  bytes.Buffer
	send func(*pb.BackupChunk) error
}

func (c *chunkSender) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if c.buf.Len() >= backupChunk {
		return len(p), c.flush()
	}
	return len(p), nil
}

func (c *chunkSender) flush() error {
	if c.buf.Len() == 0 {
		return nil
	}
	err := c.send(&pb.BackupChunk{Data: bytes.Clone(c.buf.Bytes())})
	c.buf.Reset()
	return err
}

// Backup streams the control state from the leader; a follower relays
// the leader's stream. The objects are written as they are read, so the
// file is never whole in memory: they come first, the version and
// membership after.
func (c *clusterService) Backup(_ *pb.BackupRequest, stream pb.Cluster_BackupServer) error {
	ctx := stream.Context()
	st, conn, fctx, err := c.s.leader(ctx)
	if err != nil {
		return err
	}
	if conn != nil {
		from, err := pb.NewClusterClient(conn).Backup(fctx, &pb.BackupRequest{})
		if err != nil {
			return err
		}
		for {
			m, err := from.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := stream.Send(m); err != nil {
				return err
			}
		}
	}
	w := &chunkSender{send: stream.Send}
	fmt.Fprintf(w, "{\"format\":%q,\n\"objects\":[", BackupFormat)
	n := 0
	version, servers, err := st.Dump(ctx, func(raw []byte) error {
		if n > 0 {
			w.Write([]byte(",\n"))
		} else {
			w.Write([]byte("\n"))
		}
		n++
		_, err := w.Write(raw)
		return err
	})
	if err != nil {
		return toStatus(err)
	}
	var ms []BackupManager
	for _, sv := range servers {
		ms = append(ms, BackupManager{ID: string(sv.ID), Address: string(sv.Address), Voter: sv.Suffrage == raft.Voter})
	}
	tail, err := json.Marshal(struct {
		Version  uint64          `json:"version"`
		Managers []BackupManager `json:"managers"`
		Protocol int             `json:"protocol"`
		Time     time.Time       `json:"time"`
	}{version, ms, Protocol, c.s.cfg.Now().UTC()})
	if err != nil {
		return err
	}
	// The tail's fields join the object's: drop its opening brace.
	fmt.Fprintf(w, "],\n%s\n", tail[1:])
	if err := w.flush(); err != nil {
		return err
	}
	c.s.log.Info("backup streamed", "objects", n, "version", version)
	return nil
}

// RestoreOptions say what to restore where.
type RestoreOptions struct {
	// DataDir is a stopped manager's data directory, with its pki and
	// node-id in place.
	DataDir string
	// Backup is a backup file; nil restores from the manager's own store
	// (a cluster that lost its quorum restarts from a survivor).
	Backup io.Reader
	// Advertise is the address the manager will lead at; empty takes the
	// one the backup (or, without one, the store) records for it.
	Advertise string
	// UnlockKey opens the store key of a manager whose keys are sealed
	// (autolock); unused otherwise.
	UnlockKey *pki.UnlockKey
	Now       func() time.Time
	Logger    *slog.Logger
}

// RestoreResult says what a restore did.
type RestoreResult struct {
	NodeID   string
	Address  string
	Version  uint64
	Objects  int      // from a backup
	SetAside []string // the old store's files, renamed
}

// Restore rewrites a stopped manager's store as that of a cluster of one
// (3.7): from a backup, the old store set aside and the backup's objects
// at the backup's version; without one, its own store, every entry of its
// log taken as committed. The daemon then leads alone; other managers
// join again from empty data directories with the backed-up tokens. It is
// refused while a daemon holds the directory.
func Restore(o RestoreOptions) (RestoreResult, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	var res RestoreResult
	lock, err := LockDataDir(o.DataDir)
	if err != nil {
		return res, err
	}
	defer lock.Release()
	idb, err := os.ReadFile(filepath.Join(o.DataDir, NodeIDFile))
	if err != nil {
		return res, fmt.Errorf("%s is not a manager's data directory (no %s): restore runs on one, its pki and node-id in place: %w", o.DataDir, NodeIDFile, err)
	}
	res.NodeID = strings.TrimSpace(string(idb))
	if role, err := os.ReadFile(filepath.Join(o.DataDir, roleFile)); err != nil || strings.TrimSpace(string(role)) != roleManager {
		return res, fmt.Errorf("%s is not a manager's data directory (its role is %q): only a manager's store is restored", o.DataDir, strings.TrimSpace(string(role)))
	}
	key, err := restoreStoreKey(o.DataDir, o.UnlockKey)
	if err != nil {
		return res, err
	}
	if o.Backup == nil {
		v, err := store.Recover(o.DataDir, key, res.NodeID, o.Advertise, o.Logger)
		if err != nil {
			return res, err
		}
		res.Version, res.Address = v, o.Advertise
		return res, nil
	}
	var b BackupFile
	dec := json.NewDecoder(bufio.NewReaderSize(o.Backup, 1<<20))
	if err := dec.Decode(&b); err != nil {
		return res, fmt.Errorf("reading the backup: %w", err)
	}
	switch {
	case b.Format != BackupFormat:
		return res, fmt.Errorf("the backup's format is %q, want %q: not a Legion control-state backup", b.Format, BackupFormat)
	case b.Protocol > Protocol:
		return res, fmt.Errorf("the backup was taken by a cluster speaking protocol %d, this build speaks at most %d: restore it with a newer legion", b.Protocol, Protocol)
	case b.Protocol < OldestProtocol:
		return res, fmt.Errorf("the backup's protocol %d is older than this build's oldest, %d: restore it with an older legion first", b.Protocol, OldestProtocol)
	case b.Version == 0:
		return res, errors.New("the backup records no version: it was cut short")
	}
	res.Address = o.Advertise
	if res.Address == "" {
		for _, m := range b.Managers {
			if m.ID == res.NodeID {
				res.Address = m.Address
			}
		}
		if res.Address == "" {
			return res, fmt.Errorf("the backup records no address for manager %s (it was not a manager then): give --advertise", res.NodeID)
		}
	}
	if store.Present(o.DataDir) {
		res.SetAside, err = store.SetAside(o.DataDir, "."+o.Now().UTC().Format("20060102T150405"))
		if err != nil {
			return res, err
		}
	}
	if err := store.Load(o.DataDir, key, res.NodeID, res.Address, b.Objects, b.Version, o.Logger); err != nil {
		return res, err
	}
	res.Version, res.Objects = b.Version, len(b.Objects)
	return res, nil
}
