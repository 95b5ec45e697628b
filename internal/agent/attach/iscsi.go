package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/sys"
)

// iscsiSessions is `iscsictl -L --libxo=json`. The text listing names a
// session's disks without their LUN numbers; the JSON one pairs each LUN
// with its device. While CAM probes a LUN its device is "probeN".
type iscsiSessions struct {
	ISCSICTL struct {
		Session []iscsiSession `json:"session"`
	} `json:"iscsictl"`
}

type iscsiSession struct {
	Name    string `json:"name"`   // target
	Portal  string `json:"portal"` // as given to -p
	State   string `json:"state"`  // "Connected", or why not ("Waiting for iscsid(8)", ...)
	Devices struct {
		LUN []struct {
			LUN    int    `json:"lun"`
			Device string `json:"device"` // da0, or probe0 while CAM probes it
		} `json:"lun"`
	} `json:"devices"`
}

// attachISCSI logs in to the target, checks the LUN's UFS and mounts it
// once for all the node's tasks: a task finding it mounted shares it.
func (a *Attacher) attachISCSI(ctx context.Context, taskDir string, rec record) error {
	unlock, err := a.lockTarget(ctx, rec)
	if err != nil {
		return err
	}
	defer unlock()
	if mounted, err := a.mountedAt(ctx, rec.Dir); err != nil {
		return fmt.Errorf("iscsi: reading the mount table: %w", err)
	} else if mounted {
		return nil
	}
	if _, err := sys.Run(ctx, a.Runner, "kldload", "-n", "iscsi"); err != nil {
		return fmt.Errorf("iscsi: loading the initiator: %w", err)
	}
	if err := a.ensureISCSID(ctx); err != nil {
		return err
	}
	sessions, err := a.iscsiSessions(ctx)
	if err != nil {
		return err
	}
	if _, ok := findSession(sessions, rec); !ok {
		if _, err := sys.Run(ctx, a.Runner, "iscsictl", "-A", "-p", rec.Portal, "-t", rec.Target); err != nil {
			return fmt.Errorf("iscsi: logging in to %s at %s: %w", rec.Target, rec.Portal, err)
		}
	}
	dev, err := a.waitLUN(ctx, rec)
	if err != nil {
		return err
	}
	res, err := sys.Run(ctx, a.Runner, "fstyp", dev)
	if fs := strings.TrimSpace(string(res.Stdout)); err != nil || fs != "ufs" {
		found := fs
		if err != nil {
			found = exitText(res, err)
		}
		// A disk whose partition table fstyp does not know looks blank;
		// formatting it could destroy it, so a person must.
		return fmt.Errorf("iscsi: LUN %d of %s (%s) holds no UFS file system (fstyp: %s); refused, never formatted: make the file system once by hand (newfs)",
			rec.LUN, rec.Target, dev, found)
	}
	// A node that went down using it left it unclean, and FreeBSD mounts
	// an unclean UFS only read-only: check it as boot checks its own.
	if res, err := sys.Run(ctx, a.Runner, "fsck", "-p", "-t", "ufs", dev); err != nil {
		return fmt.Errorf("iscsi: checking LUN %d of %s (%s) with fsck -p failed: %s", rec.LUN, rec.Target, dev, exitText(res, err))
	}
	if err := os.MkdirAll(rec.Dir, 0o755); err != nil {
		return fmt.Errorf("iscsi: making the mount point: %w", err)
	}
	if res, err := sys.Run(ctx, a.Runner, "mount", "-t", "ufs", dev, rec.Dir); err != nil {
		return fmt.Errorf("iscsi: mounting %s: %s", dev, exitText(res, err))
	}
	return nil
}

// ensureISCSID starts iscsid(8), which carries out the kernel's logins,
// unless it runs. rc.subr's status says "is not running." with exit 1.
func (a *Attacher) ensureISCSID(ctx context.Context) error {
	_, err := sys.Run(ctx, a.Runner, "service", "iscsid", "onestatus")
	if err == nil {
		return nil
	}
	if ee := (*sys.ExitError)(nil); !errors.As(err, &ee) {
		return fmt.Errorf("iscsi: asking whether iscsid runs: %w", err)
	}
	if res, err := sys.Run(ctx, a.Runner, "service", "iscsid", "onestart"); err != nil {
		return fmt.Errorf("iscsi: starting iscsid: %s", exitText(res, err))
	}
	return nil
}

func (a *Attacher) iscsiSessions(ctx context.Context) ([]iscsiSession, error) {
	res, err := sys.Run(ctx, a.Runner, "iscsictl", "-L", "--libxo=json")
	if err != nil {
		return nil, fmt.Errorf("iscsi: listing sessions: %w", err)
	}
	var l iscsiSessions
	if err := json.Unmarshal(res.Stdout, &l); err != nil {
		return nil, fmt.Errorf("iscsi: reading iscsictl -L's listing: %w", err)
	}
	return l.ISCSICTL.Session, nil
}

func findSession(sessions []iscsiSession, rec record) (iscsiSession, bool) {
	for _, s := range sessions {
		if s.Name == rec.Target && s.Portal == rec.Portal {
			return s, true
		}
	}
	return iscsiSession{}, false
}

// waitLUN waits for the LUN's disk device and returns its path.
func (a *Attacher) waitLUN(ctx context.Context, rec record) (string, error) {
	deadline := time.Now().Add(lunWait)
	last := "no session"
	waiting := func() error {
		return fmt.Errorf("iscsi: waiting for LUN %d of %s at %s (session: %s): %w", rec.LUN, rec.Target, rec.Portal, last, ctx.Err())
	}
	for {
		sessions, err := a.iscsiSessions(ctx)
		if err != nil {
			if ctx.Err() != nil {
				// Ended mid-listing: what the session last said is the
				// news, not the listing cut short.
				return "", waiting()
			}
			return "", err
		}
		if s, ok := findSession(sessions, rec); ok {
			last = s.State
			for _, l := range s.Devices.LUN {
				if l.LUN != rec.LUN {
					continue
				}
				if l.Device != "" && !strings.HasPrefix(l.Device, "probe") {
					return "/dev/" + l.Device, nil
				}
				last += ": " + l.Device
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("iscsi: LUN %d of %s at %s has no disk after %s (session: %s)", rec.LUN, rec.Target, rec.Portal, lunWait, last)
		}
		select {
		case <-ctx.Done():
			return "", waiting()
		case <-time.After(lunPoll):
		}
	}
}

// detachISCSI unmounts the LUN once no other task of the node uses it, and
// logs out of the target once none uses any of its LUNs.
func (a *Attacher) detachISCSI(ctx context.Context, taskDir string, rec record) error {
	unlock, err := a.lockTarget(ctx, rec)
	if err != nil {
		return err
	}
	defer unlock()
	users, err := a.othersUsing(taskDir, func(o record) bool { return o.Driver == legion.DriverISCSI && o.Dir == rec.Dir })
	if err != nil {
		return fmt.Errorf("iscsi: finding the LUN's other users: %w", err)
	}
	if len(users) > 0 {
		a.log().Debug("iscsi volume still used; left mounted", "dir", rec.Dir, "tasks", users)
		return nil
	}
	if err := a.unmount(ctx, rec.Dir); err != nil {
		return fmt.Errorf("iscsi: %w", err)
	}
	users, err = a.othersUsing(taskDir, func(o record) bool {
		return o.Driver == legion.DriverISCSI && o.Portal == rec.Portal && o.Target == rec.Target
	})
	if err != nil {
		return fmt.Errorf("iscsi: finding the target's other users: %w", err)
	}
	if len(users) > 0 {
		a.log().Debug("iscsi target still used; left logged in", "target", rec.Target, "tasks", users)
		return nil
	}
	// The kernel answers ESRCH for a session that is gone already.
	if _, err := sys.Run(ctx, a.Runner, "iscsictl", "-R", "-p", rec.Portal, "-t", rec.Target); err != nil && !sys.IsExit(err, "No such process") {
		return fmt.Errorf("iscsi: logging out of %s at %s: %w", rec.Target, rec.Portal, err)
	}
	return nil
}

// lockTarget takes the lock of rec's target, taken after the volume's:
// Volumes on LUNs of one target share its session, so their logins and
// logouts must not interleave either.
func (a *Attacher) lockTarget(ctx context.Context, rec record) (func(), error) {
	unlock, err := a.lock(ctx, "iscsi target "+rec.Portal+" "+rec.Target)
	if err != nil {
		return nil, fmt.Errorf("iscsi: waiting for the lock of %s at %s: %w", rec.Target, rec.Portal, err)
	}
	return unlock, nil
}
