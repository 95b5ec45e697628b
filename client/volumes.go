package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/legionbsd/legion"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
)

// restoreChunk is how much of a restore's data goes in one message: well
// under the message limit, big enough that framing costs little.
const restoreChunk = 256 << 10

// BackupHeaderWriter is a writer that wants a backup's header before its
// data, as a backup file does (the header is its first line): BackupVolume
// calls WriteBackupHeader once, before the first Write.
type BackupHeaderWriter interface {
	io.Writer
	WriteBackupHeader(legion.VolumeBackupHeader) error
}

// BackupVolume streams the Volume's data and returns its header; w
// receives the data stream only (and the header first, if it is a
// BackupHeaderWriter). The header's Consistency says what the data is as
// of: one instant (a ZFS snapshot) or file by file (a directory). The call
// is retried while no manager
// answers, only until the first byte arrives.
func (c *Client) BackupVolume(ctx context.Context, namespace, name string, w io.Writer) (legion.VolumeBackupHeader, error) {
	if name == "" {
		return legion.VolumeBackupHeader{}, errors.New("volume backup: a volume name is required")
	}
	what := "backup of volume " + namespace + "/" + name
	if namespace == "" {
		what = "backup of volume " + legion.DefaultNamespace + "/" + name
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var h legion.VolumeBackupHeader
	err := c.beforeFirstByte(ctx, func() (bool, error) {
		stream, err := pb.NewVolumesClient(c.conn).Backup(ctx, &pb.VolumeBackupRequest{Namespace: namespace, Name: name})
		if err != nil {
			return false, err
		}
		first, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return true, fmt.Errorf("%s: the stream ended before its header", what)
		}
		if err != nil {
			return false, err
		}
		if h, err = readHeader(what, first); err != nil {
			return true, err
		}
		if hw, ok := w.(BackupHeaderWriter); ok {
			if err := hw.WriteBackupHeader(h); err != nil {
				return true, err
			}
		}
		return true, copyChunks(what, stream, w)
	})
	return h, wrap(err)
}

// readHeader checks that a backup stream's first message is a header of
// the format this client reads.
func readHeader(what string, m *pb.VolumeChunk) (legion.VolumeBackupHeader, error) {
	var h legion.VolumeBackupHeader
	if len(m.Header) == 0 {
		return h, fmt.Errorf("%s: the stream's first message has no header", what)
	}
	if err := json.Unmarshal(m.Header, &h); err != nil {
		return h, fmt.Errorf("%s: header: %w", what, err)
	}
	if h.Format != legion.VolumeBackupFormat {
		return h, fmt.Errorf("%s: header format %q, expected %q", what, h.Format, legion.VolumeBackupFormat)
	}
	if len(m.Data) > 0 {
		return h, fmt.Errorf("%s: the header message carries data", what)
	}
	return h, nil
}

// copyChunks writes the data of a backup stream's messages after the
// header until the stream ends.
func copyChunks(what string, stream grpc.ServerStreamingClient[pb.VolumeChunk], w io.Writer) error {
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if len(m.Header) > 0 {
			return fmt.Errorf("%s: a second header in the stream", what)
		}
		if _, err := w.Write(m.Data); err != nil {
			return err
		}
	}
}

// RestoreVolume sends h (Namespace/Name/Node say where; the rest as backed
// up) then r's data, and returns the Volume made. The server refuses a
// name a Volume already has, and a node that has data of that name. The
// call is retried while no manager answers, only until r is first read.
func (c *Client) RestoreVolume(ctx context.Context, h legion.VolumeBackupHeader, r io.Reader) (*legion.Volume, error) {
	if h.Format == "" {
		h.Format = legion.VolumeBackupFormat
	}
	if h.Namespace == "" {
		h.Namespace = legion.DefaultNamespace
	}
	what := "restore of volume " + h.Namespace + "/" + h.Name
	switch {
	case h.Format != legion.VolumeBackupFormat:
		return nil, fmt.Errorf("%s: header format %q, expected %q", what, h.Format, legion.VolumeBackupFormat)
	case h.Name == "":
		return nil, errors.New("volume restore: header name: a volume name is required")
	case h.Node == "":
		return nil, fmt.Errorf("%s: header node: the node to restore onto is required", what)
	}
	header, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var made *legion.Volume
	err = c.beforeFirstByte(ctx, func() (bool, error) {
		stream, err := pb.NewVolumesClient(c.conn).Restore(ctx)
		if err != nil {
			return false, err
		}
		read, err := sendRestore(stream, header, r)
		if err != nil {
			return read, err
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			return read, err
		}
		made = &legion.Volume{}
		if err := json.Unmarshal(resp.Volume, made); err != nil {
			return true, fmt.Errorf("%s: the Volume made: %w", what, err)
		}
		return true, nil
	})
	return made, wrap(err)
}

// sendRestore sends the header, then r's data; read says whether r was
// read at all (after which the call cannot be tried again). When the
// server ends the stream early, its answer is the error.
func sendRestore(stream grpc.ClientStreamingClient[pb.VolumeChunk, pb.VolumeRestoreResponse], header []byte, r io.Reader) (read bool, err error) {
	send := func(m *pb.VolumeChunk) error {
		err := stream.Send(m)
		if errors.Is(err, io.EOF) {
			// The server ended the stream: its status says why.
			_, err = stream.CloseAndRecv()
			if err == nil {
				err = errors.New("the server ended the restore before all the data was sent")
			}
		}
		return err
	}
	if err := send(&pb.VolumeChunk{Header: header}); err != nil {
		return false, err
	}
	for {
		// A fresh buffer each time: a sent message may still be read
		// (by stats handlers) after Send returns.
		buf := make([]byte, restoreChunk)
		n, rerr := r.Read(buf)
		read = true
		if n > 0 {
			if err := send(&pb.VolumeChunk{Data: buf[:n]}); err != nil {
				return true, err
			}
		}
		if errors.Is(rerr, io.EOF) {
			return true, nil
		}
		if rerr != nil {
			return true, rerr
		}
	}
}

// beforeFirstByte runs a streaming call, again while it fails with
// UNAVAILABLE before it has moved any data (started false), for up to
// the client's retry period.
func (c *Client) beforeFirstByte(ctx context.Context, call func() (started bool, err error)) error {
	deadline := time.Now().Add(c.retry)
	wait := 50 * time.Millisecond
	for {
		started, err := call()
		if started || !retryable(err) || c.retry < 0 || time.Now().Add(wait).After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(wait*2, time.Second)
	}
}
