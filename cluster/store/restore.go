package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
)

// Backup and restore of the control state (3.7). Dump reads every object
// of a running cluster at one linearizable version; Load writes them into
// a new store of a cluster of one, and Recover makes a stopped manager's
// own store that, for a cluster that lost its quorum.

// Dump calls fn with every object's JSON, in key order, read at one
// version after a linearizable barrier (so on the leader, everything
// acknowledged before the call), and returns that version and the Raft
// membership.
func (s *Store) Dump(ctx context.Context, fn func(raw []byte) error) (version uint64, servers []raft.Server, err error) {
	if err := s.Barrier(ctx); err != nil {
		return 0, nil, err
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return 0, nil, fmt.Errorf("reading the membership: %w", err)
	}
	servers = f.Configuration().Servers
	err = s.fsm.read(func(r *reader) error {
		version = r.v.applied
		return r.scan(nil, func(_, v []byte) error { return fn(v) })
	})
	return version, servers, err
}

// Present reports whether dir holds a store (its file or its log).
func Present(dir string) bool {
	for _, name := range []string{FileName, LogDir} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}

// SetAside moves the store in dir out of the way, renaming its file and
// log with suffix (e.g. ".20261202T031500"), and returns the new names.
func SetAside(dir, suffix string) ([]string, error) {
	var moved []string
	for _, name := range []string{FileName, LogDir} {
		from := filepath.Join(dir, name)
		if _, err := os.Stat(from); errors.Is(err, os.ErrNotExist) {
			continue
		}
		to := from + suffix
		if err := os.Rename(from, to); err != nil {
			return moved, fmt.Errorf("setting the old store aside: %w", err)
		}
		moved = append(moved, to)
	}
	return moved, syncDir(dir)
}

// soleVoter is the membership of a cluster of one.
func soleVoter(id, addr string) raft.Configuration {
	return raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)}}}
}

// keyCurrentTerm is raft's stable-store key of the current term.
var keyCurrentTerm = []byte("CurrentTerm")

// freshTerm is the term a loaded or recovered store starts from: the
// clock's seconds, or the term it had if that is higher. Its cluster's
// next entries then share no term with the entries the cluster before
// it wrote at the same indexes (one election adds one to the term), so
// an index and a term (Event.Term) name a point of one history: an agent
// holding state from the cluster before is sent its new state whole, not
// changes from an index the two histories only seem to share.
func freshTerm(had uint64) uint64 { return max(had, uint64(time.Now().Unix())) }

// Load makes a new store in dir, which must hold none, with the objects
// (as Dump gave them) at version, and the manager id, at addr, its only
// voter. Opened, it leads alone at once, and writes carry on above
// version, so versions and uids never repeat the backup's.
func Load(dir string, key []byte, id, addr string, objects []json.RawMessage, version uint64, log *slog.Logger) error {
	if Present(dir) {
		return fmt.Errorf("store: %s holds a store already: set it aside first", dir)
	}
	if version == 0 {
		return errors.New("store: a backup at version 0 holds nothing")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, _, err := openParts(Config{Dir: dir, ID: id, Key: key, Logger: log})
	if err != nil {
		return err
	}
	data, err := json.Marshal(snapshotData{Index: version, Objects: objects})
	if err != nil {
		s.closeParts()
		return err
	}
	err = s.fsm.Restore(io.NopCloser(bytes.NewReader(data)))
	term := freshTerm(1)
	if err == nil {
		// A snapshot of the objects, which raft starts after and sends
		// managers joining.
		var sink raft.SnapshotSink
		sink, err = s.snaps.Create(raft.SnapshotVersionMax, version, term, soleVoter(id, addr), 1, nil)
		if err == nil {
			if _, err = sink.Write(data); err == nil {
				err = sink.Close()
			}
		}
	}
	if err == nil {
		err = s.logs.SetUint64(keyCurrentTerm, term)
	}
	if cerr := s.closeParts(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: loading the backup at version %d: %w", version, err)
	}
	return nil
}

// Recover makes the stopped manager's store in dir the store of a cluster
// of one, the manager id at addr (empty: where its membership has it) its
// only voter: every entry of its log
// is taken as committed (nothing else is left to decide) and applied, the
// log compacted into a snapshot. For a cluster that lost its quorum for
// good; it returns the version the store is at.
func Recover(dir string, key []byte, id, addr string, log *slog.Logger) (uint64, error) {
	if !Present(dir) {
		return 0, fmt.Errorf("store: %s holds no store to recover", dir)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s, _, err := openParts(Config{Dir: dir, ID: id, Key: key, Logger: log})
	if err != nil {
		return 0, err
	}
	conf := raft.DefaultConfig()
	conf.LocalID = raft.ServerID(id)
	conf.Logger = raftLogger(log)
	conf.NoSnapshotRestoreOnStart = true
	if addr == "" {
		// Where the membership last put this manager.
		_, tr := raft.NewInmemTransport("")
		cf, err := raft.GetConfiguration(conf, s.fsm, s.logs, s.logs, s.snaps, tr)
		if err != nil {
			s.closeParts()
			return 0, fmt.Errorf("store: reading the membership: %w", err)
		}
		for _, sv := range cf.Servers {
			if sv.ID == raft.ServerID(id) {
				addr = string(sv.Address)
			}
		}
		if addr == "" {
			s.closeParts()
			return 0, fmt.Errorf("store: manager %s is not in its own store's membership: give the address to lead at", id)
		}
		conf = raft.DefaultConfig()
		conf.LocalID = raft.ServerID(id)
		conf.Logger = raftLogger(log)
	}
	_, tr := raft.NewInmemTransport(raft.ServerAddress(addr))
	err = raft.RecoverCluster(conf, s.fsm, s.logs, s.logs, s.snaps, tr, soleVoter(id, addr))
	if err == nil {
		had, gerr := s.logs.GetUint64(keyCurrentTerm)
		if gerr != nil && !errors.Is(gerr, errKeyNotFound) {
			err = gerr
		} else {
			err = s.logs.SetUint64(keyCurrentTerm, freshTerm(had))
		}
	}
	version := s.fsm.applied.Load()
	if cerr := s.closeParts(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("store: recovering %s: %w", dir, err)
	}
	return version, nil
}
