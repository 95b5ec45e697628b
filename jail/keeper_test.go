package jail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recordingDriver notes, in order, what the Keeper asks of a runtime.
type recordingDriver struct {
	mu    sync.Mutex
	calls []string
}

func (d *recordingDriver) note(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, s)
}

func (d *recordingDriver) got() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

func (d *recordingDriver) Boot(context.Context) (int64, error) { return 7, nil }
func (d *recordingDriver) AskStop(_ context.Context, pid int) error {
	d.note(fmt.Sprintf("ask-stop %d", pid))
	return nil
}
func (d *recordingDriver) Kill(_ context.Context, rec Record, run RunInfo) error {
	d.note(fmt.Sprintf("kill %s %d", rec.Spec.ID, run.Pid))
	return nil
}
func (d *recordingDriver) Settle(_ context.Context, rec Record) error {
	d.note("settle " + rec.Spec.ID)
	return nil
}
func (d *recordingDriver) Release(_ context.Context, rec Record) error {
	d.note("release " + rec.Spec.ID)
	return nil
}

// newTestKeeper keeps records in a temporary directory; its scans for
// ended runs wait an hour of clock's time.
func newTestKeeper(t *testing.T, clock Clock) (*Keeper, *recordingDriver, Records) {
	recs := Records{Dir: t.TempDir()}
	d := &recordingDriver{}
	k := NewKeeper(recs, clock, nil, func(int) bool { return true }, d,
		KeeperTiming{Poll: time.Second, Watch: time.Hour, ShimMargin: 5 * time.Second})
	return k, d, recs
}

// A supervisor that never reports: Stop leaves its request, signals the
// supervisor, waits grace plus the margin, then has the Driver kill the
// run; Killed writes the exit record none wrote.
func TestKeeperStopKillsWhenTheSupervisorIsSilent(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Unix(1764000000, 0)}
	k, d, recs := newTestKeeper(t, clock)
	ctx := context.Background()
	rec := Record{Spec: ContainerSpec{ID: "web", Command: []string{"/bin/sh"}}, Jail: "web"}
	if err := recs.Create(rec); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(filepath.Join(recs.Path("web"), RunFile), RunInfo{Boot: 7, ShimPid: 40, Pid: 41}); err != nil {
		t.Fatal(err)
	}
	if st, err := k.Inspect(ctx, "web"); err != nil || st.State != StateRunning {
		t.Fatalf("before stop: %+v, %v; want running", st, err)
	}
	if err := k.Stop(ctx, "web", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ask-stop 40", "kill web 41"}, d.got()); diff != "" {
		t.Errorf("driver calls (-want +got):\n%s", diff)
	}
	if clock.waited != 7*time.Second {
		t.Errorf("waited %v for the supervisor, want grace 2s + margin 5s", clock.waited)
	}
	var req StopRequest
	if err := ReadJSON(filepath.Join(recs.Path("web"), StopFile), &req); err != nil || req.Grace != 2*time.Second {
		t.Errorf("stop request %+v, %v; want grace 2s", req, err)
	}
	if err := k.Killed(ctx, "web", 0, "gone"); err != nil {
		t.Fatal(err)
	}
	st, err := k.Inspect(ctx, "web")
	if err != nil || st.State != StateExited || st.ExitCode != 137 || st.Signal != "KILL" || st.Message != "gone" {
		t.Errorf("after kill: %+v, %v; want exited 137 by KILL saying gone", st, err)
	}
}

// A supervisor that writes the exit record and ends while its status is
// read: the status is the exit it recorded, not "gone without an exit
// status" (255), whichever of the two the read saw first.
func TestKeeperStatusOfASupervisorEndingMeanwhile(t *testing.T) {
	t.Parallel()
	recs := Records{Dir: t.TempDir()}
	rec := Record{Spec: ContainerSpec{ID: "job", Command: []string{"/bin/true"}}, Jail: "job"}
	if err := recs.Create(rec); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(filepath.Join(recs.Path("job"), RunFile), RunInfo{Boot: 7, ShimPid: 40, Pid: 41}); err != nil {
		t.Fatal(err)
	}
	// The supervisor ends as it is looked at: its exit record written,
	// then no process.
	ended := func(int) bool {
		if err := WriteJSON(filepath.Join(recs.Path("job"), ExitFile), ExitInfo{Code: 3, FinishedAt: time.Unix(1764000000, 0)}); err != nil {
			t.Error(err)
		}
		return false
	}
	k := NewKeeper(recs, RealClock{}, nil, ended, &recordingDriver{},
		KeeperTiming{Poll: time.Second, Watch: time.Hour, ShimMargin: 5 * time.Second})
	st, err := k.Inspect(context.Background(), "job")
	if err != nil || st.State != StateExited || st.ExitCode != 3 || st.Message != "" {
		t.Fatalf("status %+v, %v; want exited with code 3", st, err)
	}
}

// Removing a pod removes its members first; each member is settled and
// released before its record goes, the pod released last, and each
// removal is an event.
func TestKeeperRemovesAPodMembersFirst(t *testing.T) {
	t.Parallel()
	k, d, recs := newTestKeeper(t, RealClock{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(k.Wait)
	t.Cleanup(cancel)
	for _, spec := range []ContainerSpec{
		{ID: "pod", Infra: true},
		{ID: "a", Pod: "pod", Command: []string{"/bin/sh"}},
		{ID: "b", Pod: "pod", Command: []string{"/bin/sh"}},
		{ID: "other", Command: []string{"/bin/sh"}},
	} {
		if err := recs.Create(Record{Spec: spec}); err != nil {
			t.Fatal(err)
		}
	}
	events, err := k.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Remove(ctx, "pod"); err != nil {
		t.Fatal(err)
	}
	want := []string{"settle a", "release a", "settle b", "release b", "release pod"}
	if diff := cmp.Diff(want, d.got()); diff != "" {
		t.Errorf("driver calls (-want +got):\n%s", diff)
	}
	if ids, err := recs.IDs(); err != nil || !cmp.Equal(ids, []string{"other"}) {
		t.Errorf("records left %v, %v; want [other]", ids, err)
	}
	// Remove emits as it goes: its events are queued by now.
	var removed []string
	for queued := true; queued; {
		select {
		case ev := <-events:
			if ev.Type == EventRemoved {
				removed = append(removed, ev.ID)
			}
		default:
			queued = false
		}
	}
	if diff := cmp.Diff([]string{"a", "b", "pod"}, removed); diff != "" {
		t.Errorf("removed events (-want +got):\n%s", diff)
	}
	if err := k.Remove(ctx, "pod"); err != nil {
		t.Errorf("removing it again: %v, want nil", err)
	}
}

// gatedClock lets each wait end when the test says: every After is the
// one channel the test sends on.
type gatedClock struct{ tick chan time.Time }

func (c *gatedClock) Now() time.Time                       { return time.Now() }
func (c *gatedClock) After(time.Duration) <-chan time.Time { return c.tick }

// A follow that had nothing to read yet, of a container that wrote and
// was removed between two of its polls (a job's task that says its line
// and ends at once), ends with ErrNotFound, not as an empty log: legion
// logs -f of a job lost such a task's line, which the agent had saved.
func TestKeeperFollowOfAContainerRemovedUnreadIsNotFound(t *testing.T) {
	t.Parallel()
	polls := &gatedClock{tick: make(chan time.Time)}
	k, _, recs := newTestKeeper(t, polls)
	if err := recs.Create(Record{Spec: ContainerSpec{ID: "job", Command: []string{"/bin/true"}}, Jail: "job"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Not removed, nothing written yet: an empty log, no error.
	rc, err := k.Logs(ctx, "job", LogOptions{})
	if err != nil {
		t.Fatalf("logs of a container that wrote nothing yet: %v", err)
	}
	if data, err := io.ReadAll(rc); err != nil || len(data) != 0 {
		t.Fatalf("logs of a container that wrote nothing yet: %q, %v", data, err)
	}
	rc, err = k.Logs(ctx, "job", LogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	lf := &LogFile{Path: filepath.Join(recs.Path("job"), LogFileName)}
	if err := lf.Append(StreamStdout, false, []byte("through")); err != nil {
		t.Fatal(err)
	}
	lf.Close()
	if err := recs.Remove("job"); err != nil {
		t.Fatal(err)
	}
	select {
	case polls.tick <- time.Now(): // the follow's next poll
	case <-time.After(10 * time.Second):
		t.Fatal("the follow never polled")
	}
	data, err := io.ReadAll(rc)
	if !errors.Is(err, ErrNotFound) || len(data) != 0 {
		t.Fatalf("follow of a container removed before its log was read: %q, %v; want nothing and ErrNotFound", data, err)
	}
	if _, err := k.Logs(ctx, "job", LogOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("logs once removed: %v, want ErrNotFound", err)
	}
}
