package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	pb "github.com/legionbsd/legion/internal/proto"
)

// AuditEvent is one audited request (9): who asked what of which object,
// how it ended and which manager decided.
type AuditEvent struct {
	Time      time.Time
	Actor     string // as the certificate names it; empty without one
	Role      string // the certificate's role
	From      string // the caller's address
	Action    string // apply, delete, init, join, exec, get (refused), ...
	Kind      string
	Namespace string
	Name      string
	Outcome   string // ok, denied or error
	Message   string // the refusal's or error's text
	Manager   string
}

// AuditFilter narrows Audit; the zero value lists everything kept.
type AuditFilter struct {
	Since     time.Time
	Actor     string
	Action    string
	Namespace string
	Kind      string
	Denied    bool // refusals only
}

// Audit lists the audit events the cluster keeps, oldest first (cluster
// admin only). Events reach it within a couple of seconds of the request.
func (c *Client) Audit(ctx context.Context, f AuditFilter) ([]AuditEvent, error) {
	req := &pb.AuditRequest{Actor: f.Actor, Action: f.Action, Namespace: f.Namespace, Kind: f.Kind, Denied: f.Denied}
	if !f.Since.IsZero() {
		req.SinceUnixNano = f.Since.UnixNano()
	}
	stream, err := c.cluster.Audit(ctx, req)
	if err != nil {
		return nil, wrap(err)
	}
	var out []AuditEvent
	for {
		e, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("audit: %w", wrap(err))
		}
		out = append(out, AuditEvent{Time: time.Unix(0, e.TimeUnixNano), Actor: e.Actor, Role: e.Role, From: e.From,
			Action: e.Action, Kind: e.Kind, Namespace: e.Namespace, Name: e.Name, Outcome: e.Outcome, Message: e.Message, Manager: e.Manager})
	}
}
