package sessionsclient

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/legionbsd/legion/internal/agent"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/jail"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var errUnsupported = status.Error(codes.Unimplemented, "this agent does not serve this kind of session")

// batchBytes bounds the text of one frame.
const batchBytes = 64 << 10

// logs sends the container's records: the live log while the container
// exists, else the output saved when its pod was removed (which a follow
// ends at its end). A live log whose container went before any of it was
// read goes on with the saved output: the pod's removal saved it first.
func (c *Client) logs(ctx context.Context, st legionpb.Sessions_AttachClient, o *legionpb.SessionOffer, lo *legionpb.LogsOffer) error {
	rc, err := c.open(ctx, o, lo)
	if err != nil {
		return sendError(st, err)
	}
	var since time.Time
	if lo.SinceUnixNano != 0 {
		since = time.Unix(0, lo.SinceUnixNano)
	}
	sent, err := sendRecords(ctx, st, rc, since)
	if errors.Is(err, jail.ErrNotFound) && !sent {
		if rc, err = c.saved(o); status.Code(err) == codes.NotFound {
			return nil // it went without a word, and none was kept
		} else if err != nil {
			return sendError(st, err)
		}
		_, err = sendRecords(ctx, st, rc, since)
	}
	var readErr *readError
	if errors.As(err, &readErr) {
		return sendError(st, status.Errorf(codes.Internal, "reading the log of container %s of task %s/%s: %v", o.Container, o.Namespace, o.Task, readErr.err))
	}
	return err
}

// readError is a log that could not be read, apart from a failed send.
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// sendRecords sends rc's records at or after since, batched, until its
// end or ctx's, and closes it. It reports whether it sent any frame; a
// failure to read comes as a readError.
func sendRecords(ctx context.Context, st legionpb.Sessions_AttachClient, rc io.ReadCloser, since time.Time) (sent bool, _ error) {
	defer rc.Close()
	// A follow blocks in Read until new output: closing ends it.
	stop := context.AfterFunc(ctx, func() { rc.Close() })
	defer stop()
	br := bufio.NewReaderSize(rc, 64<<10)
	var batch []*legionpb.LogRecord
	size := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := st.Send(&legionpb.AttachOutput{Records: batch})
		batch, size, sent = nil, 0, true
		return err
	}
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			if r, ok := record(line, since); ok {
				batch = append(batch, r)
				size += len(r.Text)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return sent, nil
			}
			if ferr := flush(); ferr != nil {
				return sent, ferr
			}
			if errors.Is(err, io.EOF) {
				return sent, nil
			}
			return sent, &readError{err}
		}
		if br.Buffered() == 0 || size >= batchBytes {
			if err := flush(); err != nil {
				return sent, err
			}
		}
	}
}

// record parses one log line, keeping it when at or after since. A line
// that is no record is passed on as stdout text.
func record(line string, since time.Time) (*legionpb.LogRecord, bool) {
	r, err := jail.ParseRecord(line)
	if err != nil {
		return &legionpb.LogRecord{Stream: jail.StreamStdout, Text: strings.TrimSuffix(line, "\n")}, true
	}
	if !since.IsZero() && r.Time.Before(since) {
		return nil, false
	}
	return &legionpb.LogRecord{TimeUnixNano: r.Time.UnixNano(), Stream: r.Stream, Partial: r.Partial, Text: r.Text}, true
}

// open reads the container's log, or its saved output once the pod is
// gone.
func (c *Client) open(ctx context.Context, o *legionpb.SessionOffer, lo *legionpb.LogsOffer) (io.ReadCloser, error) {
	if !safeName(o.TaskUid) || !safeName(o.Container) {
		return nil, status.Errorf(codes.InvalidArgument, "task uid %q and container %q: expected plain names", o.TaskUid, o.Container)
	}
	opts := jail.LogOptions{Follow: lo.Follow}
	if lo.SinceUnixNano != 0 {
		opts.Since = time.Unix(0, lo.SinceUnixNano)
	}
	rc, err := c.cfg.Logs(ctx, o.TaskUid+"-"+o.Container, opts)
	if err == nil {
		return rc, nil
	}
	if !errors.Is(err, jail.ErrNotFound) {
		return nil, status.Errorf(codes.Internal, "reading the log of container %s of task %s/%s: %v", o.Container, o.Namespace, o.Task, err)
	}
	return c.saved(o)
}

// saved opens the output kept when the container's pod was removed.
func (c *Client) saved(o *legionpb.SessionOffer) (io.ReadCloser, error) {
	f, err := os.Open(filepath.Join(agent.SavedOutputDir(c.cfg.DataDir, o.TaskUid), o.Container+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "container %s of task %s/%s has no output on this node: neither its container nor saved output is here", o.Container, o.Namespace, o.Task)
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "saved output of container %s of task %s/%s: %v", o.Container, o.Namespace, o.Task, err)
	}
	return f, nil
}

func safeName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, `/\`)
}

// sendError ends the session with err's code and message.
func sendError(st legionpb.Sessions_AttachClient, err error) error {
	s := status.Convert(err)
	if e := st.Send(&legionpb.AttachOutput{Error: &legionpb.SessionError{Code: int32(s.Code()), Message: s.Message()}}); e != nil {
		return fmt.Errorf("sending %q: %w", s.Message(), e)
	}
	return nil
}
