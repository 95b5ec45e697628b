package store

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// committer is group commit without waiting: a write that finds no
// transaction running commits at once; writes that arrive while one runs
// share the next transaction, and so one pair of fsyncs. Raft's log
// appends and its state machine's applies, which run side by side under
// load, go through it. (bbolt's Batch does the same but holds even a lone
// write for its delay.)
type committer struct {
	db      *bolt.DB
	mu      sync.Mutex
	running bool
	queue   []*commitJob
}

type commitJob struct {
	fn   func(*bolt.Tx) error
	done chan error
}

// update runs fn in a read-write transaction, perhaps shared with others.
// fn may run twice (alone, if the shared transaction failed), so it must
// start from scratch each time.
func (c *committer) update(fn func(*bolt.Tx) error) error {
	j := &commitJob{fn: fn, done: make(chan error, 1)}
	c.mu.Lock()
	c.queue = append(c.queue, j)
	if c.running {
		c.mu.Unlock()
		return <-j.done
	}
	c.running = true
	for len(c.queue) > 0 {
		batch := c.queue
		c.queue = nil
		c.mu.Unlock()
		c.commit(batch)
		c.mu.Lock()
	}
	c.running = false
	c.mu.Unlock()
	return <-j.done
}

func (c *committer) commit(batch []*commitJob) {
	if len(batch) == 1 {
		batch[0].done <- c.db.Update(batch[0].fn)
		return
	}
	err := c.db.Update(func(tx *bolt.Tx) error {
		for _, j := range batch {
			if err := j.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		for _, j := range batch {
			j.done <- nil
		}
		return
	}
	// One failed and rolled back the others: each alone, so only it fails.
	for _, j := range batch {
		j.done <- c.db.Update(j.fn)
	}
}
