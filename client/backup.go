package client

import (
	"context"
	"errors"
	"fmt"
	"io"

	pb "github.com/legionbsd/legion/internal/proto"
)

// Backup writes a backup of the control state to w (cluster admin only):
// every object, Secrets and join tokens among them, read by the leader at
// one version, with the managers of the time. The managers' keys are not
// in it. An error may leave w holding part of it.
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	stream, err := pb.NewClusterClient(c.conn).Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		return wrap(err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wrap(err)
		}
		if _, err := w.Write(m.Data); err != nil {
			return fmt.Errorf("backup: %w", err)
		}
	}
}
