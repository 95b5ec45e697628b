package sys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// Streamer runs a command whose input or output is too large to hold in
// memory (zfs send, zfs receive): stdin is fed from a reader and stdout
// copied to a writer while the command runs. Result carries only Stderr.
// Errors are as Run's: an *ExitError for a command that ran and failed.
type Streamer interface {
	Stream(ctx context.Context, c Cmd, stdin io.Reader, stdout io.Writer) (Result, error)
}

// streamWaitDelay bounds how long a finished or killed command waits for
// its input copy: a reader blocked on a stalled network must not hold it.
const streamWaitDelay = 5 * time.Second

// Stream implements Streamer. A nil stdin gives the command no input; a
// nil stdout discards its output.
func (Exec) Stream(ctx context.Context, c Cmd, stdin io.Reader, stdout io.Writer) (Result, error) {
	cmd := exec.CommandContext(ctx, c.Name, c.Args...)
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, &stderr
	cmd.WaitDelay = streamWaitDelay
	err := cmd.Run()
	res := Result{Stderr: stderr.Bytes()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return res, &ExitError{Cmd: c.String(), Code: ee.ExitCode(), Stderr: stderr.String()}
	}
	if err != nil {
		return res, fmt.Errorf("%s: %w", c.String(), err)
	}
	return res, nil
}

// Stream implements Streamer for tests: it reads all of stdin (recorded as
// the call's Stdin), answers as Run does and writes the answer's Stdout to
// stdout. A stdin that fails to read makes a command the script lets
// succeed fail with that error, as a real command's input copy would.
func (f *Fake) Stream(ctx context.Context, c Cmd, stdin io.Reader, stdout io.Writer) (Result, error) {
	var in []byte
	var readErr error
	if stdin != nil {
		in, readErr = io.ReadAll(stdin)
	}
	res, err := f.Run(ctx, Cmd{Name: c.Name, Args: c.Args, Stdin: in})
	if err == nil && readErr != nil {
		err = fmt.Errorf("%s: stdin: %w", c.String(), readErr)
	}
	if stdout != nil && len(res.Stdout) > 0 {
		if _, werr := stdout.Write(res.Stdout); werr != nil && err == nil {
			err = fmt.Errorf("%s: stdout: %w", c.String(), werr)
		}
	}
	return Result{Stderr: res.Stderr}, err
}
