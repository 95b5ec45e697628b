package attach

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/sys"
)

// Platforms an Attacher runs on.
const (
	PlatformJails   = "jails"   // FreeBSD: every driver
	PlatformProcess = "process" // any Unix: plugins only
)

// DefaultPluginDir is where volume plugins are looked for unless
// Attacher.PluginDir says otherwise.
const DefaultPluginDir = "/usr/local/libexec/legion/volume"

// Attacher mounts NFS, iSCSI and plugin Volumes for tasks and unmounts
// them again. Its zero value is not usable: Runner, RunDir and Platform
// are required.
type Attacher struct {
	Runner    sys.Runner // FreeBSD commands (mount, umount, iscsictl, kldload, fstyp, fsck, service)
	RunDir    string     // node run directory; task directories are <RunDir>/tasks/<uid>, iSCSI LUNs mount at <RunDir>/volumes/iscsi/<ns>/<name>
	PluginDir string     // executables <PluginDir>/<name>; DefaultPluginDir when empty
	Platform  string     // PlatformJails or PlatformProcess
	Logger    *slog.Logger

	// locks holds one lock a volume (namespace/name): a starting task's
	// attach and a stopping task's detach of it never interleave.
	locks sync.Map // string -> chan struct{}
	// fileMu serialises the read-modify-write of attached.json files, which
	// attaches of different volumes of one task share.
	fileMu sync.Mutex
}

// Serves reports whether this node can serve volumes of driver d and, if
// not, why.
func (a *Attacher) Serves(d legion.VolumeDriver) (bool, string) {
	switch a.Platform {
	case PlatformJails, PlatformProcess:
	default:
		return false, fmt.Sprintf("volume drivers: unknown node platform %q (want %q or %q)", a.Platform, PlatformJails, PlatformProcess)
	}
	switch d {
	case legion.DriverPlugin:
		return true, ""
	case legion.DriverNFS:
		if a.Platform == PlatformProcess {
			return false, "nfs volumes need FreeBSD's mount_nfs; this node runs the process platform"
		}
		return true, ""
	case legion.DriverISCSI:
		if a.Platform == PlatformProcess {
			return false, "iscsi volumes need FreeBSD's iSCSI initiator (iscsictl) and UFS; this node runs the process platform"
		}
		return true, ""
	case legion.DriverZFS:
		return false, "zfs volumes are the node's own datasets, not attached from elsewhere"
	}
	return false, fmt.Sprintf("unknown volume driver %q", d)
}

// Attach mounts v for the task whose private directory is taskDir and
// returns the host path its containers mount (by nullfs). The attach is
// recorded in taskDir/attached.json before anything is mounted; a failed
// attach undoes what it did and drops the record, or leaves the record for
// Detach when the undoing failed too.
func (a *Attacher) Attach(ctx context.Context, taskDir string, v *legion.Volume) (string, error) {
	ns, name := v.Metadata.Namespace, v.Metadata.Name
	id := ns + "/" + name
	if ok, why := a.Serves(v.Spec.Driver); !ok {
		return "", fmt.Errorf("volume %s: %s", id, why)
	}
	rec, err := a.newRecord(taskDir, v)
	if err != nil {
		return "", fmt.Errorf("volume %s: %w", id, err)
	}
	unlock, err := a.lock(ctx, id)
	if err != nil {
		return "", fmt.Errorf("volume %s: waiting for its lock: %w", id, err)
	}
	defer unlock()

	if err := a.putRecord(taskDir, rec); err != nil {
		return "", fmt.Errorf("volume %s: recording the attach: %w", id, err)
	}
	var attachErr error
	switch rec.Driver {
	case legion.DriverNFS:
		attachErr = a.attachNFS(ctx, rec, v.Spec.NFS.Server, v.Spec.NFS.Path, v.Spec.NFS.Options)
	case legion.DriverISCSI:
		attachErr = a.attachISCSI(ctx, taskDir, rec)
	case legion.DriverPlugin:
		attachErr = a.attachPlugin(ctx, rec)
	}
	if attachErr == nil {
		return rec.Dir, nil
	}
	attachErr = fmt.Errorf("volume %s: %w", id, attachErr)
	// Undo with a context of its own: the attach may have failed because
	// ctx ended, and what it mounted must still go.
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	if err := a.undo(undoCtx, taskDir, rec); err != nil {
		a.log().Warn("undoing a failed volume attach; left recorded for the task's teardown",
			"volume", id, "dir", rec.Dir, "err", err)
		return "", errors.Join(attachErr, fmt.Errorf("undoing it: %w", err))
	}
	if err := a.dropRecord(taskDir, rec); err != nil {
		return "", errors.Join(attachErr, err)
	}
	return "", attachErr
}

// Detach undoes every attach recorded in taskDir/attached.json, removing
// each record once it is undone. Records it cannot undo stay for the next
// try and their errors are returned together; a directory without records
// is success.
func (a *Attacher) Detach(ctx context.Context, taskDir string) error {
	recs, err := a.readRecords(taskDir)
	if err != nil {
		return err
	}
	var errs []error
	// Newest first, the reverse of the attaches.
	for i := len(recs) - 1; i >= 0; i-- {
		rec := recs[i]
		id := rec.Namespace + "/" + rec.Volume
		if err := a.detachOne(ctx, taskDir, rec); err != nil {
			errs = append(errs, fmt.Errorf("volume %s (%s at %s): %w", id, rec.Driver, rec.Dir, err))
		}
	}
	return errors.Join(errs...)
}

func (a *Attacher) detachOne(ctx context.Context, taskDir string, rec record) error {
	unlock, err := a.lock(ctx, rec.Namespace+"/"+rec.Volume)
	if err != nil {
		return fmt.Errorf("waiting for its lock: %w", err)
	}
	defer unlock()
	if err := a.undo(ctx, taskDir, rec); err != nil {
		return err
	}
	return a.dropRecord(taskDir, rec)
}

// undo reverses rec's attach, whatever part of it happened: each step
// accepts that what it undoes is already gone.
func (a *Attacher) undo(ctx context.Context, taskDir string, rec record) error {
	switch rec.Driver {
	case legion.DriverNFS:
		return a.detachNFS(ctx, rec)
	case legion.DriverISCSI:
		return a.detachISCSI(ctx, taskDir, rec)
	case legion.DriverPlugin:
		return a.detachPlugin(ctx, rec)
	}
	return fmt.Errorf("unknown volume driver %q in %s", rec.Driver, filepath.Join(taskDir, recordFile))
}

// lock takes the volume's lock, waiting no longer than ctx allows.
func (a *Attacher) lock(ctx context.Context, id string) (func(), error) {
	ch, _ := a.locks.LoadOrStore(id, make(chan struct{}, 1))
	sem := ch.(chan struct{})
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (a *Attacher) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.New(slog.DiscardHandler)
}

func (a *Attacher) pluginDir() string {
	if a.PluginDir != "" {
		return a.PluginDir
	}
	return DefaultPluginDir
}
