package attach

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/legionbsd/legion"
)

// recordFile is the name of a task's list of attaches, in its directory.
const recordFile = "attached.json"

// record is one attach a task's teardown must undo: enough to undo it
// without the Volume object, which may be gone by then.
type record struct {
	Driver    legion.VolumeDriver `json:"driver"`
	Namespace string              `json:"namespace"`
	Volume    string              `json:"volume"`
	Dir       string              `json:"dir"` // where it is mounted

	// iscsi
	Portal string `json:"portal,omitempty"`
	Target string `json:"target,omitempty"`
	LUN    int    `json:"lun,omitempty"`

	// plugin
	Plugin  string            `json:"plugin,omitempty"`
	Options map[string]string `json:"options,omitempty"`
}

// recordsFile is attached.json.
type recordsFile struct {
	Volumes []record `json:"volumes"`
}

func (r record) sameVolume(o record) bool { return r.Namespace == o.Namespace && r.Volume == o.Volume }

// newRecord checks v's driver settings and says where it will be mounted.
func (a *Attacher) newRecord(taskDir string, v *legion.Volume) (record, error) {
	ns, name := v.Metadata.Namespace, v.Metadata.Name
	if ns == "" || name == "" || filepath.Base(ns) != ns || filepath.Base(name) != name || ns == ".." || name == ".." {
		return record{}, fmt.Errorf("metadata: namespace %q and name %q must both be plain names", ns, name)
	}
	rec := record{Driver: v.Spec.Driver, Namespace: ns, Volume: name}
	switch v.Spec.Driver {
	case legion.DriverNFS:
		n := v.Spec.NFS
		switch {
		case n == nil:
			return record{}, errors.New("spec.nfs: missing")
		case n.Server == "":
			return record{}, errors.New("spec.nfs.server: missing")
		case n.Path == "":
			return record{}, errors.New("spec.nfs.path: missing")
		}
		rec.Dir = filepath.Join(taskDir, "volumes", name)
	case legion.DriverISCSI:
		s := v.Spec.ISCSI
		switch {
		case s == nil:
			return record{}, errors.New("spec.iscsi: missing")
		case s.Portal == "":
			return record{}, errors.New("spec.iscsi.portal: missing")
		case s.Target == "":
			return record{}, errors.New("spec.iscsi.target: missing")
		case s.LUN < 0:
			return record{}, fmt.Errorf("spec.iscsi.lun: %d, must not be negative", s.LUN)
		}
		rec.Portal, rec.Target, rec.LUN = s.Portal, s.Target, s.LUN
		rec.Dir = a.iscsiDir(ns, name)
	case legion.DriverPlugin:
		p := v.Spec.Plugin
		switch {
		case p == nil:
			return record{}, errors.New("spec.plugin: missing")
		case p.Name == "" || filepath.Base(p.Name) != p.Name || p.Name == "..":
			return record{}, fmt.Errorf("spec.plugin.name: %q is not a plain file name", p.Name)
		}
		rec.Plugin, rec.Options = p.Name, p.Options
		rec.Dir = filepath.Join(taskDir, "volumes", name)
	default:
		return record{}, fmt.Errorf("spec.driver: %q is not attached by this node's volume attacher", v.Spec.Driver)
	}
	return rec, nil
}

// iscsiDir is where a LUN is mounted once for all the node's tasks.
func (a *Attacher) iscsiDir(ns, name string) string {
	return filepath.Join(a.RunDir, "volumes", "iscsi", ns, name)
}

// readRecords reads taskDir's records; none when the file is missing.
func (a *Attacher) readRecords(taskDir string) ([]record, error) {
	a.fileMu.Lock()
	defer a.fileMu.Unlock()
	return readRecordsFile(filepath.Join(taskDir, recordFile))
}

// Recorded reports whether taskDir's records hold the Volume namespace/name
// attached: its teardown has not undone it yet.
func (a *Attacher) Recorded(taskDir, namespace, name string) (bool, error) {
	recs, err := a.readRecords(taskDir)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(recs, func(r record) bool { return r.Namespace == namespace && r.Volume == name }), nil
}

func readRecordsFile(path string) ([]record, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the volume records: %w", err)
	}
	var f recordsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("reading the volume records %s: %w", path, err)
	}
	return f.Volumes, nil
}

// putRecord adds rec to taskDir's records, in place of one for the same
// volume.
func (a *Attacher) putRecord(taskDir string, rec record) error {
	return a.editRecords(taskDir, func(recs []record) []record {
		recs = slices.DeleteFunc(recs, rec.sameVolume)
		return append(recs, rec)
	})
}

// dropRecord removes taskDir's record of rec's volume; the file goes with
// the last one.
func (a *Attacher) dropRecord(taskDir string, rec record) error {
	return a.editRecords(taskDir, func(recs []record) []record {
		return slices.DeleteFunc(recs, rec.sameVolume)
	})
}

func (a *Attacher) editRecords(taskDir string, edit func([]record) []record) error {
	a.fileMu.Lock()
	defer a.fileMu.Unlock()
	path := filepath.Join(taskDir, recordFile)
	recs, err := readRecordsFile(path)
	if err != nil {
		return err
	}
	recs = edit(recs)
	if len(recs) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing the volume records: %w", err)
		}
		return nil
	}
	b, err := json.MarshalIndent(recordsFile{Volumes: recs}, "", "  ")
	if err != nil {
		return err
	}
	return writeFileSynced(path, append(b, '\n'))
}

// writeFileSynced replaces path with data whole: written aside, synced and
// renamed, so a crash leaves the old records or the new, never half.
func writeFileSynced(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("writing the volume records: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), recordFile+".*")
	if err != nil {
		return fmt.Errorf("writing the volume records: %w", err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the volume records: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing the volume records: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the volume records: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing the volume records: %w", err)
	}
	return nil
}

// othersUsing lists the records of tasks other than taskDir's that match.
func (a *Attacher) othersUsing(taskDir string, match func(record) bool) ([]string, error) {
	a.fileMu.Lock()
	defer a.fileMu.Unlock()
	paths, err := filepath.Glob(filepath.Join(a.RunDir, "tasks", "*", recordFile))
	if err != nil {
		return nil, err
	}
	self := filepath.Clean(filepath.Join(taskDir, recordFile))
	var users []string
	for _, p := range paths {
		if filepath.Clean(p) == self {
			continue
		}
		recs, err := readRecordsFile(p)
		if err != nil {
			// An unreadable record might be a user: keep the LUN rather
			// than pull it from under a task.
			return nil, err
		}
		if slices.ContainsFunc(recs, match) {
			users = append(users, filepath.Base(filepath.Dir(p)))
		}
	}
	return users, nil
}
