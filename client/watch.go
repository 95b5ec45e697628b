package client

import (
	"context"
	"errors"

	"github.com/legionbsd/legion"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// Event types.
const (
	Added    = "ADDED"
	Modified = "MODIFIED"
	Deleted  = "DELETED"
)

// Event is one change to an object.
type Event struct {
	Type    string
	Version uint64
	Object  legion.Object
}

// Watch is an open watch stream.
type Watch struct {
	stream grpc.ServerStreamingClient[pb.WatchEvent]
	cancel context.CancelFunc
}

// Watch follows the changes to a kind after version from (0: from now),
// as the manager it reaches applies them. Next fails with ErrCompacted
// or ErrReset when the caller must list again.
func (c *Client) Watch(ctx context.Context, kind legion.Kind, opts ListOptions, from uint64) (*Watch, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.objects.Watch(ctx, &pb.WatchRequest{Kind: string(kind), Namespace: opts.Namespace,
		AllNamespaces: opts.AllNamespaces, Labels: opts.Labels, FromVersion: from})
	if err != nil {
		cancel()
		return nil, watchErr(err)
	}
	return &Watch{stream: stream, cancel: cancel}, nil
}

// Next waits for the next event.
func (w *Watch) Next() (Event, error) {
	e, err := w.stream.Recv()
	if err != nil {
		return Event{}, watchErr(err)
	}
	o, err := pb.FromProto(e.Object)
	if err != nil {
		return Event{}, err
	}
	return Event{Type: e.Type, Version: e.Version, Object: o}, nil
}

// Close ends the watch.
func (w *Watch) Close() { w.cancel() }

func watchErr(err error) error {
	err = wrap(err)
	switch Code(err) {
	case codes.OutOfRange:
		return errors.Join(ErrCompacted, err)
	case codes.Aborted:
		return errors.Join(ErrReset, err)
	}
	return err
}

// Update is what ListWatch hands its callback: either a full listing
// (after the first list and after every relist), or one event.
type Update struct {
	Listed  bool            // Objects holds the complete current set
	Objects []legion.Object // when Listed
	Version uint64          // the listing's version, or the event's
	Event   *Event          // when not Listed
}

// ListWatch lists a kind and follows it, listing again whenever the
// watch is compacted or reset, until the context ends or fn fails. Other
// stream errors (a manager going away) also lead to a new list.
func (c *Client) ListWatch(ctx context.Context, kind legion.Kind, opts ListOptions, fn func(Update) error) error {
	for {
		objs, version, err := c.List(ctx, kind, opts)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err() // ended by the caller, whatever the call said
			}
			return err
		}
		if err := fn(Update{Listed: true, Objects: objs, Version: version}); err != nil {
			return err
		}
		w, err := c.Watch(ctx, kind, opts, version)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			continue
		}
		for {
			e, err := w.Next()
			if err != nil {
				w.Close()
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, ErrCompacted) || errors.Is(err, ErrReset) || Code(err) == codes.Unavailable {
					break
				}
				return err
			}
			if err := fn(Update{Version: e.Version, Event: &e}); err != nil {
				w.Close()
				return err
			}
		}
	}
}
