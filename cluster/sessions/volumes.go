package sessions

import (
	"context"
	"errors"
	"fmt"
	"io"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// volumeChunk is the most data one message of a ReceiveVolume carries; it
// matches the agents' own chunks (sessionsclient.VolumeChunk).
const volumeChunk = 512 << 10

// CopyVolume joins a send session on node from to a receive session on
// node to: what the sender streams is relayed to the receiver as it
// comes, then closed. It returns nil only once the sender said all was
// sent and the receiver said all was kept. Any failure (either side's
// error, a broken stream, ctx) ends both sessions, so a receiver never
// takes a cut stream for a whole one. gRPC's flow control holds the
// sender back to the receiver's pace: nothing is buffered here.
func (s *Service) CopyVolume(ctx context.Context, from, to string, send *legionpb.VolumeSendOffer, recv *legionpb.VolumeReceiveOffer) error {
	caller := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The receiver first: a refusal comes before any data is read.
	rx, err := s.attach(ctx, to, &legionpb.SessionOffer{Namespace: recv.Namespace, Kind: &legionpb.SessionOffer_VolumeReceive{VolumeReceive: recv}})
	if err != nil {
		return err
	}
	defer rx.close()
	tx, err := s.attach(ctx, from, &legionpb.SessionOffer{Namespace: send.Namespace, Kind: &legionpb.SessionOffer_VolumeSend{VolumeSend: send}})
	if err != nil {
		return err
	}
	defer tx.close()
	errs := make(chan error, 2)
	go func() { errs <- feed(ctx, tx, rx) }()
	go func() { errs <- rx.awaitDone(ctx, "receive") }()
	return callerEnded(caller, firstError(cancel, errs, 2))
}

// callerEnded is err, or the caller's own end when its context ended: a
// relay the caller's cancel broke (each side sees it in its own way, and
// whichever comes first would be reported) failed because of the caller,
// not of a node.
func callerEnded(caller context.Context, err error) error {
	if err != nil && caller.Err() != nil {
		return status.FromContextError(caller.Err()).Err()
	}
	return err
}

// feed relays a send session's data to a receive session and closes it.
func feed(ctx context.Context, tx, rx *attached) error {
	err := tx.stream(ctx, func(p []byte) error {
		if err := rx.send(&legionpb.AttachInput{Data: p}); err != nil {
			return status.Errorf(codes.Unavailable, "relaying volume data to node %s: %v", rx.node, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := rx.send(&legionpb.AttachInput{Closed: true}); err != nil {
		return status.Errorf(codes.Unavailable, "closing the volume stream to node %s: %v", rx.node, err)
	}
	return nil
}

// firstError waits for n results and returns the first failure, ending
// the others with cancel; nil only when all succeeded.
func firstError(cancel context.CancelFunc, errs <-chan error, n int) error {
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}

// SendVolume streams node's send session into w (a backup). It returns
// nil only once the node said all was sent.
func (s *Service) SendVolume(ctx context.Context, node string, send *legionpb.VolumeSendOffer, w io.Writer) error {
	tx, err := s.attach(ctx, node, &legionpb.SessionOffer{Namespace: send.Namespace, Kind: &legionpb.SessionOffer_VolumeSend{VolumeSend: send}})
	if err != nil {
		return err
	}
	defer tx.close()
	return tx.stream(ctx, func(p []byte) error {
		if _, err := w.Write(p); err != nil {
			return fmt.Errorf("volume %s/%s: writing the data of node %s: %w", send.Namespace, send.Volume, node, err)
		}
		return nil
	})
}

// ReceiveVolume streams r into node's receive session (a restore): r's
// end (io.EOF) closes the stream; any other error of r ends the session
// without closing it, so the node keeps nothing. It returns nil only once
// the node said all was kept.
func (s *Service) ReceiveVolume(ctx context.Context, node string, recv *legionpb.VolumeReceiveOffer, r io.Reader) error {
	caller := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rx, err := s.attach(ctx, node, &legionpb.SessionOffer{Namespace: recv.Namespace, Kind: &legionpb.SessionOffer_VolumeReceive{VolumeReceive: recv}})
	if err != nil {
		return err
	}
	defer rx.close()
	errs := make(chan error, 2)
	go func() { errs <- upload(r, rx) }()
	go func() { errs <- rx.awaitDone(ctx, "receive") }()
	return callerEnded(caller, firstError(cancel, errs, 2))
}

// upload sends r's data to a receive session, then closes it.
func upload(r io.Reader, rx *attached) error {
	for {
		buf := make([]byte, volumeChunk) // gRPC may hold on to a sent message
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			if serr := rx.send(&legionpb.AttachInput{Data: buf[:n]}); serr != nil {
				return status.Errorf(codes.Unavailable, "sending volume data to node %s: %v", rx.node, serr)
			}
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			if serr := rx.send(&legionpb.AttachInput{Closed: true}); serr != nil {
				return status.Errorf(codes.Unavailable, "closing the volume stream to node %s: %v", rx.node, serr)
			}
			return nil
		case err != nil:
			return err
		}
	}
}

// DropVolume asks node to destroy its copy of a Volume and returns once
// it did.
func (s *Service) DropVolume(ctx context.Context, node string, drop *legionpb.VolumeDropOffer) error {
	a, err := s.attach(ctx, node, &legionpb.SessionOffer{Namespace: drop.Namespace, Kind: &legionpb.SessionOffer_VolumeDrop{VolumeDrop: drop}})
	if err != nil {
		return err
	}
	defer a.close()
	return a.awaitDone(ctx, "drop")
}

// stream hands each piece of data the node sends to put until it says all
// was sent; the session ending before that is an error.
func (a *attached) stream(ctx context.Context, put func([]byte) error) error {
	done := false
	err := a.relay(ctx, func(m *legionpb.AttachOutput) error {
		if done {
			return status.Errorf(codes.Internal, "node %s sent volume data after saying all was sent", a.node)
		}
		if len(m.Data) > 0 {
			if err := put(m.Data); err != nil {
				return err
			}
		}
		done = m.Done
		return nil
	})
	if err == nil && !done {
		err = status.Errorf(codes.Unavailable, "node %s ended the volume send before all of it was sent", a.node)
	}
	return err
}

// awaitDone waits for the node to say the session's work is done.
func (a *attached) awaitDone(ctx context.Context, what string) error {
	done := false
	err := a.relay(ctx, func(m *legionpb.AttachOutput) error {
		done = done || m.Done
		return nil
	})
	if err == nil && !done {
		err = status.Errorf(codes.Unavailable, "node %s ended the volume %s without saying it was done", a.node, what)
	}
	return err
}
