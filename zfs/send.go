package zfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/legionbsd/legion/sys"
)

// ErrNoStreams: the runner cannot stream a command's input or output
// (it does not implement sys.Streamer), so send and receive cannot run.
var ErrNoStreams = errors.New("zfs: the system runner cannot stream command input and output")

func (z *ZFS) stream(ctx context.Context, stdin io.Reader, stdout io.Writer, args ...string) error {
	s, ok := z.r.(sys.Streamer)
	if !ok {
		return ErrNoStreams
	}
	_, err := s.Stream(ctx, sys.Command("zfs", args...), stdin, stdout)
	if sys.IsExit(err, "must specify -F to overwrite it") {
		// A full stream into an existing file system: zfs receive names
		// the destination as existing without "already".
		return errors.Join(ErrExists, err)
	}
	return classify(err)
}

// Send writes snapshot (dataset@snap) as a zfs send stream to w: all of
// it, or with from (a snapshot name of the same dataset, without the
// dataset) only what changed since from (zfs send -i @from). A missing
// snapshot or incremental source answers ErrNotFound.
func (z *ZFS) Send(ctx context.Context, snapshot, from string, w io.Writer) error {
	if !strings.Contains(snapshot, "@") {
		return fmt.Errorf("send %q: want dataset@snap", snapshot)
	}
	args := []string{"send"}
	if from != "" {
		args = append(args, "-i", "@"+strings.TrimPrefix(from, "@"))
	}
	args = append(args, snapshot)
	if err := z.stream(ctx, nil, w, args...); err != nil {
		return fmt.Errorf("send %s: %w", snapshot, err)
	}
	return nil
}

// Receive reads a zfs send stream from r into dataset, leaving it
// unmounted (-u). props are set as if before the receive (-o k=v), e.g.
// a quota. force (-F) rolls the dataset back to the stream's incremental
// source first, so an incremental stream received again is taken on.
// A full stream into an existing dataset answers ErrExists. zfs drops a
// receive cut short; a full receive that fails may still leave an empty
// dataset behind, which is the caller's to destroy.
func (z *ZFS) Receive(ctx context.Context, dataset string, props map[string]string, force bool, r io.Reader) error {
	args := []string{"receive", "-u"}
	if force {
		args = append(args, "-F")
	}
	args = append(args, propArgs(props)...)
	args = append(args, dataset)
	if err := z.stream(ctx, r, nil, args...); err != nil {
		return fmt.Errorf("receive into %s: %w", dataset, err)
	}
	return nil
}
