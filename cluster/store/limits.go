package store

import (
	"errors"
	"fmt"

	"github.com/legionbsd/legion"
)

// MaxEntry is the largest command the store proposes. An object as
// admitted is at most legion.MaxObjectSize; stored, a Service's status
// can hold two more copies of its spec (the spec seen last and, during an
// update, the previous one), and the rest of a status and the command's
// own fields get another MiB. The Raft transport is built to carry any
// entry of this size (cluster/server), so no write can make a log entry
// the managers cannot replicate.
const MaxEntry = 3*legion.MaxObjectSize + 1<<20

// ErrTooLarge: a write's entry would be over MaxEntry; nothing was
// proposed.
var ErrTooLarge = errors.New("too large to store")

// checkEntry refuses a command whose encoding is over MaxEntry, before it
// reaches the log.
func checkEntry(c *command, data []byte) error {
	if len(data) <= MaxEntry {
		return nil
	}
	return fmt.Errorf("%s %s: %w: its log entry would be %d bytes, at most %d allowed",
		c.Kind, displayKey(c), ErrTooLarge, len(data), MaxEntry)
}
