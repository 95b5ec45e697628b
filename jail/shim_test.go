package jail_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/jail"
)

// A supervisor that cannot set its container up reports so to Start,
// which returns ShimExitFailed with the reason, and says why in shim.log,
// named by its command.
func TestShimFrontStartReportsASupervisorThatFails(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() // no record.json: the supervisor has nothing to run
	front := jail.ShimFront{Command: "jail-shim"}
	code, reason := front.Start(exe, dir, nil)
	if code != jail.ShimExitFailed || !strings.Contains(reason, jail.RecordFile) {
		t.Fatalf("Start = %d, %q: want ShimExitFailed (%d) naming %s", code, reason, jail.ShimExitFailed, jail.RecordFile)
	}
	// The supervisor writes its reason after its report: poll for it.
	want := "jail-shim: " + dir + ": "
	var log []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if log, err = os.ReadFile(filepath.Join(dir, jail.ShimLogFile)); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(log), want) || time.Now().After(deadline) {
			break
		}
	}
	if !strings.Contains(string(log), want) || !strings.Contains(string(log), jail.RecordFile) {
		t.Errorf("shim.log %q: want a line starting %q naming %s", log, want, jail.RecordFile)
	}
}
