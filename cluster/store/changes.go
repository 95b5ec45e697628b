package store

import (
	"context"
	"errors"

	"github.com/legionbsd/legion"
)

// Version is the version this replica has applied up to, read as a List
// reads it: the point to watch from after reading the objects.
func (s *Store) Version() (uint64, error) {
	_, at, err := s.List(legion.KindNamespace, "", func(legion.Object) bool { return false })
	return at, err
}

// WaitChange waits for the first change after version from to an object
// of one of the kinds (any kind when none are given). It returns nil on
// such a change, and also when the watch history no longer reaches back
// to from (compacted, or reset by a snapshot): either way the caller
// reads again. from is a read's version, 0 included (see AfterRead). It
// returns ctx's error when ctx ends first, and ErrClosed when the store
// shuts down.
func (s *Store) WaitChange(ctx context.Context, from uint64, kinds ...legion.Kind) error {
	return s.WaitEvent(ctx, from, func(Event) bool { return true }, kinds...)
}

// WaitEvent is WaitChange for the first event after version from that
// match reports, for a caller that needs only some changes of a kind.
func (s *Store) WaitEvent(ctx context.Context, from uint64, match func(Event) bool, kinds ...legion.Kind) error {
	w, err := s.Watch(AfterRead(from), kinds...)
	if errors.Is(err, ErrCompacted) {
		return nil
	}
	if err != nil {
		return err
	}
	for {
		ev, err := w.Next(ctx)
		switch {
		case errors.Is(err, ErrCompacted), errors.Is(err, ErrReset):
			return nil
		case err != nil:
			return err
		}
		if match(ev) {
			return nil
		}
	}
}
