package sessionsclient

import (
	"context"
	"errors"
	"fmt"
	"io"

	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// VolumeData serves volume sessions from the node's volume store. An
// error that is a gRPC status keeps its code on its way to the manager;
// any other is sent as INTERNAL.
type VolumeData interface {
	// SendVolume writes the offered snapshot's stream (or increment) to w.
	SendVolume(ctx context.Context, o *legionpb.VolumeSendOffer, w io.Writer) error
	// ReceiveVolume keeps the stream r gives. r ends with io.EOF only once
	// the manager said the stream is whole; a stream cut short ends with
	// another error, which ReceiveVolume must return, keeping no part copy.
	ReceiveVolume(ctx context.Context, o *legionpb.VolumeReceiveOffer, r io.Reader) error
	// DropVolume destroys the node's copy of a Volume that lives elsewhere.
	DropVolume(ctx context.Context, o *legionpb.VolumeDropOffer) error
}

// VolumeChunk is the most data one message of a volume send carries:
// large enough that per-message costs vanish beside the copying, well
// under gRPC's default 4 MiB message limit.
const VolumeChunk = 512 << 10

// errStreamCut is what a receive reads when the manager ended the session
// before saying the stream was whole.
var errStreamCut = errors.New("the manager ended the volume stream before its end: the data is not whole")

// volumeSend streams the Volume's data as output chunks, then says done.
func (c *Client) volumeSend(ctx context.Context, st legionpb.Sessions_AttachClient, o *legionpb.VolumeSendOffer) error {
	if c.cfg.Volumes == nil {
		return sendError(st, errNoVolumes)
	}
	if err := checkVolume(o.Namespace, o.Volume); err != nil {
		return sendError(st, err)
	}
	w := &chunker{send: func(p []byte) error { return st.Send(&legionpb.AttachOutput{Data: p}) }}
	err := c.cfg.Volumes.SendVolume(ctx, o, w)
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		if ctx.Err() != nil || w.err != nil {
			return err // the stream is gone: no one to tell
		}
		return sendError(st, volumeStatus("sending", o.Namespace, o.Volume, err))
	}
	return st.Send(&legionpb.AttachOutput{Done: true})
}

// volumeReceive hands the relayed data to the volume store and says done
// once it kept all of it.
func (c *Client) volumeReceive(ctx context.Context, st legionpb.Sessions_AttachClient, o *legionpb.VolumeReceiveOffer, inputs <-chan *legionpb.AttachInput) error {
	if c.cfg.Volumes == nil {
		return sendError(st, errNoVolumes)
	}
	if err := checkVolume(o.Namespace, o.Volume); err != nil {
		return sendError(st, err)
	}
	r := &inputReader{inputs: inputs}
	err := c.cfg.Volumes.ReceiveVolume(ctx, o, r)
	if err == nil {
		// A reader such as tar may stop before the stream's padding: the
		// rest must still arrive, or the stream was not whole.
		_, err = io.Copy(io.Discard, r)
	}
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, errStreamCut) {
			return nil // the manager is gone or ended it: no one to tell
		}
		return sendError(st, volumeStatus("receiving", o.Namespace, o.Volume, err))
	}
	return st.Send(&legionpb.AttachOutput{Done: true})
}

// volumeDrop destroys the node's copy and says done.
func (c *Client) volumeDrop(ctx context.Context, st legionpb.Sessions_AttachClient, o *legionpb.VolumeDropOffer) error {
	if c.cfg.Volumes == nil {
		return sendError(st, errNoVolumes)
	}
	if err := checkVolume(o.Namespace, o.Volume); err != nil {
		return sendError(st, err)
	}
	if err := c.cfg.Volumes.DropVolume(ctx, o); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return sendError(st, volumeStatus("dropping", o.Namespace, o.Volume, err))
	}
	return st.Send(&legionpb.AttachOutput{Done: true})
}

var errNoVolumes = status.Error(codes.Unimplemented, "this agent does not serve volume sessions")

// checkVolume refuses names that are no plain names: they become paths
// and dataset names on the node.
func checkVolume(ns, name string) error {
	if !safeName(ns) || !safeName(name) {
		return status.Errorf(codes.InvalidArgument, "volume %q in namespace %q: expected plain names", name, ns)
	}
	return nil
}

// volumeStatus keeps a status error's code and names the Volume.
func volumeStatus(doing, ns, name string, err error) error {
	if s, ok := status.FromError(err); ok {
		return status.Errorf(s.Code(), "%s volume %s/%s: %s", doing, ns, name, s.Message())
	}
	return status.Errorf(codes.Internal, "%s volume %s/%s: %v", doing, ns, name, err)
}

// chunker cuts what is written into messages of at most VolumeChunk
// bytes. Each message gets its own buffer, as gRPC may hold on to a sent
// message.
type chunker struct {
	buf  []byte
	send func([]byte) error
	err  error // the first failed send: the stream is gone
}

func (c *chunker) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if c.err != nil {
			return n, c.err
		}
		if c.buf == nil {
			c.buf = make([]byte, 0, VolumeChunk)
		}
		k := copy(c.buf[len(c.buf):cap(c.buf)], p)
		c.buf, p, n = c.buf[:len(c.buf)+k], p[k:], n+k
		if len(c.buf) == cap(c.buf) {
			if err := c.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

func (c *chunker) flush() error {
	if c.err != nil || len(c.buf) == 0 {
		return c.err
	}
	if err := c.send(c.buf); err != nil {
		c.err = fmt.Errorf("sending volume data: %w", err)
	}
	c.buf = nil
	return c.err
}

// inputReader reads the data the manager relays until it says the stream
// is closed (io.EOF). The session ending first is errStreamCut, never a
// clean end.
type inputReader struct {
	inputs <-chan *legionpb.AttachInput
	buf    []byte
	closed bool
}

func (r *inputReader) Read(p []byte) (int, error) {
	for len(r.buf) == 0 {
		if r.closed {
			return 0, io.EOF
		}
		in, ok := <-r.inputs
		if !ok {
			return 0, errStreamCut
		}
		r.buf, r.closed = in.Data, in.Closed
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}
