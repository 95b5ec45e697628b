package jail

import (
	"errors"
	"fmt"
	"testing"
)

// PermanentReason keeps why, and drops the call, the container id and
// the mark, whichever way the failure was wrapped.
func TestPermanentReason(t *testing.T) {
	cause := errors.New("fork/exec /bin/sh: no such file or directory")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("exec in %s: %w: %w", "uid-app", ErrPermanent, cause), "fork/exec /bin/sh: no such file or directory"},
		{fmt.Errorf("exec in %s: %w: %s", "uid-app", ErrPermanent, "jexec: sh: not found"), "jexec: sh: not found"},
		{fmt.Errorf("exec in %s: %w", "uid-app", cause), "exec in uid-app: fork/exec /bin/sh: no such file or directory"},
	} {
		if got := PermanentReason(tc.err); got != tc.want {
			t.Errorf("PermanentReason(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
