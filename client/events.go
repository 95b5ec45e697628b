package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/legionbsd/legion"
	pb "github.com/legionbsd/legion/internal/proto"
)

// EventsOptions narrows Events; the zero value reads every event the
// manager keeps that the caller may read, and returns.
type EventsOptions struct {
	// Since keeps events last seen within this long before now; SinceTime,
	// when set, keeps those last seen at or after it instead.
	Since     time.Duration
	SinceTime time.Time
	// AfterSequence keeps only events with a greater sequence: pass the
	// last one seen to resume a follow.
	AfterSequence uint64
	Kind          legion.Kind
	Namespace     string // empty: every namespace the caller may read
	Object        string // the object's name; with Kind names one object
	Type          legion.EventType
	// Follow keeps the stream open, calling fn for each new event until
	// ctx ends or fn returns an error.
	Follow bool
}

// Events calls fn for each event the manager kept, oldest first, then,
// with Follow, for each new one. It returns fn's error, or nil when the
// listing ends (without Follow) or ctx ends (with it).
func (c *Client) Events(ctx context.Context, o EventsOptions, fn func(legion.Event) error) error {
	req := &pb.EventsRequest{AfterSequence: o.AfterSequence, Kind: string(o.Kind), Namespace: o.Namespace,
		Name: o.Object, Type: string(o.Type), Follow: o.Follow}
	switch {
	case !o.SinceTime.IsZero():
		req.SinceUnixNano = o.SinceTime.UnixNano()
	case o.Since > 0:
		req.SinceUnixNano = time.Now().Add(-o.Since).UnixNano()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.cluster.Events(ctx, req)
	if err != nil {
		return wrap(err)
	}
	for {
		e, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil && o.Follow && ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("events: %w", wrap(err))
		}
		if err := fn(EventFromProto(e)); err != nil {
			return err
		}
	}
}

// EventFromProto is the event a ClusterEvent carries.
func EventFromProto(e *pb.ClusterEvent) legion.Event {
	ev := legion.Event{Sequence: e.Sequence, Time: time.Unix(0, e.TimeUnixNano).UTC(), Type: legion.EventType(e.Type),
		Reason: e.Reason, Message: e.Message, Count: int(e.Count),
		Object: legion.ObjectRef{Kind: legion.Kind(e.Kind), Namespace: e.Namespace, Name: e.Name, UID: e.Uid}}
	if e.FirstUnixNano != 0 {
		ev.First = time.Unix(0, e.FirstUnixNano).UTC()
	}
	return ev
}
