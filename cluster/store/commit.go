package store

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// committer is group commit without waiting: a write that finds no
// transaction running commits at once; writes that arrive while one runs
// share the next transaction, and so one pair of fsyncs. Every
// transaction it makes also carries the state machine's pending changes
// (see pending.go). (bbolt's Batch does the same but holds even a lone
// write for its delay.)
type committer struct {
	db *bolt.DB
	// rider writes what rides along in every transaction and returns
	// what to run once that transaction is committed (may be nil).
	rider func(*bolt.Tx) (func(), error)

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
	fns := make([]func(*bolt.Tx) error, len(batch))
	for i, j := range batch {
		fns[i] = j.fn
	}
	err := c.run(fns...)
	if err == nil || len(batch) == 1 {
		for _, j := range batch {
			j.done <- err
		}
		return
	}
	// One failed and rolled back the others: each alone, so only it fails.
	for _, j := range batch {
		j.done <- c.run(j.fn)
	}
}

// run commits fns and the rider in one transaction. The rider goes first,
// so a job that rewrites what it wrote (a snapshot install) wins.
func (c *committer) run(fns ...func(*bolt.Tx) error) error {
	var after func()
	err := c.db.Update(func(tx *bolt.Tx) error {
		after = nil
		if c.rider != nil {
			a, err := c.rider(tx)
			if err != nil {
				return err
			}
			after = a
		}
		for _, fn := range fns {
			if err := fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil && after != nil {
		after()
	}
	return err
}
