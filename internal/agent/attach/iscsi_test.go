package attach

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/sys"
)

const (
	portal = "127.0.0.1"
	target = "iqn.2012-06.org.example:shop"
)

func iscsiVolume(name string, lun int) *legion.Volume {
	return volume(name, legion.VolumeSpec{Driver: legion.DriverISCSI,
		ISCSI: &legion.ISCSIVolume{Portal: portal, Target: target, LUN: lun}})
}

// Answers as FreeBSD 15's tools give them.
var (
	// mount -p: fstab lines, tab separated, of what is mounted.
	mountTable = "zroot/ROOT/default\t/\t\tzfs\trw,nfsv4acls\t\t0 0\n" +
		"devfs\t\t\t/dev\t\t\tdevfs\trw\t\t0 0\n"
	// iscsictl -L --libxo=json before any session.
	noSessions = `{"__version": "1", "iscsictl": {}}` + "\n"
	// rc.subr's status of a service that is not running.
	iscsidStopped = sys.Answer{Code: 1, Stdout: "iscsid is not running.\n"}
	// fsck -p of a clean UFS.
	fsckClean = "/dev/da0: FILE SYSTEM CLEAN; SKIPPING CHECKS\n" +
		"/dev/da0: clean, 2012 free (20 frags, 249 blocks, 0.4% fragmentation)\n"
)

// session is iscsictl -L --libxo=json with one connected session whose LUN
// 0 has the device dev (probe0 while CAM probes it).
func session(dev string) string {
	return fmt.Sprintf(`{"__version": "1", "iscsictl": {"session": [{"name":"%s","portal":"%s","state":"Connected",`+
		`"devices": {"lun": [{"lun":0,"device":"%s"}],"scbus":3,"bus":0,"target":0}}]}}`+"\n", target, portal, dev)
}

// unmountedAnswer is umount(8) on a mount point that was never made.
func unmountedAnswer(dir string) sys.Answer {
	return sys.Answer{Code: 1, Stderr: "umount: " + dir + ": statfs: No such file or directory\numount: " + dir + ": unknown file system\n"}
}

// loginSequence is what a first attach of LUN 0 runs up to fstyp.
func loginSequence() []string {
	return []string{
		"mount -p",
		"kldload -n iscsi",
		"service iscsid onestatus",
		"service iscsid onestart",
		"iscsictl -L --libxo=json",
		"iscsictl -A -p " + portal + " -t " + target,
		"iscsictl -L --libxo=json",
		"iscsictl -L --libxo=json",
		"fstyp /dev/da0",
	}
}

// rule is a Fake's answer to commands starting with prefix.
type rule struct {
	prefix string
	answer sys.Answer
}

// freshLUN scripts a node with no session and iscsid stopped, whose LUN
// is probed once before its disk shows.
// Rules in over come first and win.
func freshLUN(over ...rule) *sys.Fake {
	f := sys.NewFake()
	for _, r := range over {
		f.On(r.prefix, r.answer)
	}
	f.On("mount -p", sys.Answer{Stdout: mountTable})
	f.On("service iscsid onestatus", iscsidStopped)
	f.On("service iscsid onestart", sys.Answer{Stdout: "Starting iscsid.\n"})
	f.Once("iscsictl -L", sys.Answer{Stdout: noSessions})
	f.Once("iscsictl -L", sys.Answer{Stdout: session("probe0")})
	f.On("iscsictl -L", sys.Answer{Stdout: session("da0")})
	f.On("fstyp /dev/da0", sys.Answer{Stdout: "ufs\n"})
	f.On("fsck -p -t ufs /dev/da0", sys.Answer{Stdout: fsckClean})
	return f
}

// The node logs in, waits past the LUN's probe, checks UFS, checks the
// file system and mounts it once; the teardown unmounts and logs out.
func TestISCSILoginCheckMountLogout(t *testing.T) {
	t.Parallel()
	f := freshLUN()
	a := node(t, PlatformJails, f)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(a.RunDir, "volumes", "iscsi", "shop", "db")

	got, err := a.Attach(context.Background(), dir, iscsiVolume("db", 0))
	if err != nil {
		t.Fatal(err)
	}
	if got != mnt {
		t.Errorf("Attach returned %q, want %q", got, mnt)
	}
	wantLines(t, f, append(loginSequence(), "fsck -p -t ufs /dev/da0", "mount -t ufs /dev/da0 "+mnt)...)
	if r := records(t, dir); len(r) != 1 || r[0].Portal != portal || r[0].Target != target || r[0].Dir != mnt {
		t.Errorf("attached.json: %+v, want the LUN's record", r)
	}

	if err := a.Detach(context.Background(), dir); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f, "umount "+mnt, "iscsictl -R -p "+portal+" -t "+target)
	if r := records(t, dir); r != nil {
		t.Errorf("attached.json after the teardown: %+v, want none", r)
	}
}

// A LUN without UFS is refused, never formatted, and logged out of.
func TestISCSIBlankLUNRefusedAndLoggedOut(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformJails, nil)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(a.RunDir, "volumes", "iscsi", "shop", "db")
	f := freshLUN(rule{"fstyp /dev/da0", sys.Answer{Code: 1, Stderr: "fstyp: /dev/da0: filesystem not recognized\n"}},
		rule{"umount " + mnt, unmountedAnswer(mnt)})
	a.Runner = f

	_, err := a.Attach(context.Background(), dir, iscsiVolume("db", 0))
	if err == nil || !strings.Contains(err.Error(), "holds no UFS") || !strings.Contains(err.Error(), "filesystem not recognized") ||
		!strings.Contains(err.Error(), "never formatted") {
		t.Fatalf("Attach: %v, want the LUN refused for holding no UFS", err)
	}
	wantLines(t, f, append(loginSequence(), "umount "+mnt, "iscsictl -R -p "+portal+" -t "+target)...)
	if r := records(t, dir); r != nil {
		t.Errorf("attached.json after the refusal: %+v, want none", r)
	}
}

// A file system fsck -p cannot repair is not mounted; the node logs out.
func TestISCSIFailedFsck(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformJails, nil)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(a.RunDir, "volumes", "iscsi", "shop", "db")
	// fsck_ffs reports on standard output and exits 8.
	f := freshLUN(rule{"fsck", sys.Answer{Code: 8,
		Stdout: "PARTIALLY ALLOCATED INODE I=12\n/dev/da0: UNEXPECTED INCONSISTENCY; RUN fsck_ufs MANUALLY.\n"}},
		rule{"umount " + mnt, unmountedAnswer(mnt)})
	a.Runner = f

	_, err := a.Attach(context.Background(), dir, iscsiVolume("db", 0))
	if err == nil || !strings.Contains(err.Error(), "UNEXPECTED INCONSISTENCY; RUN fsck_ufs MANUALLY") {
		t.Fatalf("Attach: %v, want fsck's report", err)
	}
	wantLines(t, f, append(loginSequence(), "fsck -p -t ufs /dev/da0", "umount "+mnt, "iscsictl -R -p "+portal+" -t "+target)...)
	if r := records(t, dir); r != nil {
		t.Errorf("attached.json after the failure: %+v, want none", r)
	}
}

// Two tasks share the node's one mount of the LUN; the unmount and logout
// come only with the last one's teardown, also after an agent restart.
func TestISCSITwoTasksShareTheLUN(t *testing.T) {
	t.Parallel()
	f := freshLUN()
	a := node(t, PlatformJails, f)
	t1, t2 := taskDir(t, a, "t1"), taskDir(t, a, "t2")
	mnt := filepath.Join(a.RunDir, "volumes", "iscsi", "shop", "db")

	if _, err := a.Attach(context.Background(), t1, iscsiVolume("db", 0)); err != nil {
		t.Fatal(err)
	}
	// Now mounted, as mount -p says.
	f = freshLUN(rule{"mount -p", sys.Answer{Stdout: mountTable + "/dev/da0\t\t" + mnt + "\tufs\trw\t2 2\n"}})
	a.Runner = f
	got, err := a.Attach(context.Background(), t2, iscsiVolume("db", 0))
	if err != nil {
		t.Fatal(err)
	}
	if got != mnt {
		t.Errorf("second task's path %q, want the node's mount %q", got, mnt)
	}
	wantLines(t, f, "mount -p")

	if err := a.Detach(context.Background(), t1); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f) // t2 still uses it
	if r := records(t, t1); r != nil {
		t.Errorf("first task's records after its teardown: %+v, want none", r)
	}

	restarted := &Attacher{Runner: f, RunDir: a.RunDir, Platform: PlatformJails}
	if err := restarted.Detach(context.Background(), t2); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f, "umount "+mnt, "iscsictl -R -p "+portal+" -t "+target)
}

// Two Volumes on LUNs of one target: the logout waits for both.
func TestISCSILogoutWaitsForTheTargetsOtherLUN(t *testing.T) {
	t.Parallel()
	f := freshLUN()
	a := node(t, PlatformJails, f)
	t1, t2 := taskDir(t, a, "t1"), taskDir(t, a, "t2")
	mntDB := filepath.Join(a.RunDir, "volumes", "iscsi", "shop", "db")
	mntLog := filepath.Join(a.RunDir, "volumes", "iscsi", "shop", "log")
	if _, err := a.Attach(context.Background(), t1, iscsiVolume("db", 0)); err != nil {
		t.Fatal(err)
	}
	two := fmt.Sprintf(`{"__version": "1", "iscsictl": {"session": [{"name":"%s","portal":"%s","state":"Connected",`+
		`"devices": {"lun": [{"lun":0,"device":"da0"},{"lun":1,"device":"da1"}],"scbus":3,"bus":0,"target":0}}]}}`, target, portal)
	f = freshLUN(rule{"iscsictl -L", sys.Answer{Stdout: two}},
		rule{"service iscsid onestatus", sys.Answer{Stdout: "iscsid is running as pid 812.\n"}},
		rule{"fstyp /dev/da1", sys.Answer{Stdout: "ufs\n"}})
	a.Runner = f
	if _, err := a.Attach(context.Background(), t2, iscsiVolume("log", 1)); err != nil {
		t.Fatal(err)
	}
	// The session is there: no second login.
	wantLines(t, f, "mount -p", "kldload -n iscsi", "service iscsid onestatus", "iscsictl -L --libxo=json",
		"iscsictl -L --libxo=json", "fstyp /dev/da1", "fsck -p -t ufs /dev/da1", "mount -t ufs /dev/da1 "+mntLog)

	if err := a.Detach(context.Background(), t1); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f, "umount "+mntDB)
	if err := a.Detach(context.Background(), t2); err != nil {
		t.Fatal(err)
	}
	wantLines(t, f, "umount "+mntLog, "iscsictl -R -p "+portal+" -t "+target)
}

// A session that never comes up fails the attach when its context ends,
// naming the state iscsictl gave, and is logged out of all the same.
func TestISCSISessionThatNeverConnects(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformJails, nil)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(a.RunDir, "volumes", "iscsi", "shop", "db")
	waiting := refusedSession()
	f := freshLUN(rule{"iscsictl -L", sys.Answer{Stdout: waiting}}, rule{"umount " + mnt, unmountedAnswer(mnt)})
	a.Runner = f

	ctx, cancel := context.WithTimeout(context.Background(), 3*lunPoll)
	defer cancel()
	start := time.Now()
	_, err := a.Attach(ctx, dir, iscsiVolume("db", 0))
	if err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Fatalf("Attach: %v, want the session's state in the error", err)
	}
	if time.Since(start) > lunWait {
		t.Errorf("Attach took %s, past its context's end", time.Since(start))
	}
	lines := f.Lines()
	if got := lines[len(lines)-1]; got != "iscsictl -R -p "+portal+" -t "+target {
		t.Errorf("last command %q, want the logout", got)
	}
	if r := records(t, dir); r != nil {
		t.Errorf("attached.json after the failure: %+v, want none", r)
	}
}

// cutListing is f with the context ended during the third listing (the
// first looks for a session before the login, the second finds it
// waiting): as a real run killed by its context fails.
type cutListing struct {
	*sys.Fake
	cancel   context.CancelFunc
	listings int
}

func (c *cutListing) Run(ctx context.Context, cmd sys.Cmd) (sys.Result, error) {
	if strings.HasPrefix(cmd.String(), "iscsictl -L") {
		if c.listings++; c.listings == 3 {
			c.cancel()
			return sys.Result{}, ctx.Err()
		}
	}
	return c.Fake.Run(ctx, cmd)
}

// A context that ends while iscsictl lists the sessions fails the attach
// with the state the session last had, not "listing sessions: context
// canceled", and the node logs out all the same.
func TestISCSIWaitCutShortMidListingNamesTheSessionsState(t *testing.T) {
	t.Parallel()
	a := node(t, PlatformJails, nil)
	dir := taskDir(t, a, "t1")
	mnt := filepath.Join(a.RunDir, "volumes", "iscsi", "shop", "db")
	waiting := refusedSession()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := freshLUN(rule{"iscsictl -L", sys.Answer{Stdout: waiting}}, rule{"umount " + mnt, unmountedAnswer(mnt)})
	a.Runner = &cutListing{Fake: f, cancel: cancel}
	_, err := a.Attach(ctx, dir, iscsiVolume("db", 0))
	if want := "(session: Connection refused): context canceled"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Attach: %v, want an error containing %q", err, want)
	}
	lines := f.Lines()
	if got := lines[len(lines)-1]; got != "iscsictl -R -p "+portal+" -t "+target {
		t.Errorf("last command %q, want the logout", got)
	}
}

// refusedSession is iscsictl -L's listing of the target's session while
// its portal refuses the connection.
func refusedSession() string {
	return fmt.Sprintf(`{"__version": "1", "iscsictl": {"session": [{"name":"%s","portal":"%s","state":"Connection refused"}]}}`, target, portal)
}
