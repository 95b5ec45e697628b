// Package audit keeps the cluster's record of who changed what (9): the
// events a manager records as requests reach it, the bounded buffer that
// holds them until the leader writes them, the batches the leader keeps
// as Configs in the system namespace with their retention, and the
// filters `legion audit` narrows them with.
//
// An event names objects and never carries their specs, so no Secret's or
// Config's value ever lands in it. The package does no networking: the
// manager gives it its store and a way to hand events to the leader.
package audit

import (
	"strings"
	"time"
)

// Outcome is how a recorded request ended.
type Outcome string

// Outcomes.
const (
	OK     Outcome = "ok"
	Denied Outcome = "denied" // refused for the caller's rights
	Error  Outcome = "error"
)

// Actions recorded besides the API's own method names.
const (
	ActionApply  = "apply"
	ActionDelete = "delete"
)

// MaxMessage bounds an event's message: a refusal's text is kept, a long
// error's is cut, so a batch stays small.
const MaxMessage = 1024

// Event is one audited request.
type Event struct {
	Time time.Time `json:"time"`
	// Actor is who the caller's certificate names (a joining node: the
	// name it asks for); empty without a certificate.
	Actor string `json:"actor,omitempty"`
	Role  string `json:"role,omitempty"` // the certificate's role
	From  string `json:"from,omitempty"` // the caller's address
	// Action is what was asked: apply, delete, init, join, exec, ...
	Action    string  `json:"action"`
	Kind      string  `json:"kind,omitempty"`
	Namespace string  `json:"namespace,omitempty"`
	Name      string  `json:"name,omitempty"`
	Outcome   Outcome `json:"outcome"`
	// Message is the refusal's or the error's text.
	Message string `json:"message,omitempty"`
	// Manager is the manager that decided: the leader when the request
	// was passed on to it.
	Manager string `json:"manager,omitempty"`
}

// trimmed cuts an over-long message.
func (e Event) trimmed() Event {
	if len(e.Message) > MaxMessage {
		cut := MaxMessage
		for cut > 0 && !isRuneStart(e.Message[cut]) {
			cut--
		}
		e.Message = e.Message[:cut] + "…"
	}
	return e
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// Filter narrows a listing, as `legion audit` asks; the zero value keeps
// everything.
type Filter struct {
	Since     time.Time // at or after
	Actor     string
	Action    string
	Namespace string
	Kind      string // matched without regard to case (service, Service)
	Denied    bool   // refusals only
}

// Match says whether e passes the filter.
func (f Filter) Match(e Event) bool {
	switch {
	case !f.Since.IsZero() && e.Time.Before(f.Since):
	case f.Actor != "" && e.Actor != f.Actor:
	case f.Action != "" && e.Action != f.Action:
	case f.Namespace != "" && e.Namespace != f.Namespace:
	case f.Kind != "" && !strings.EqualFold(e.Kind, f.Kind):
	case f.Denied && e.Outcome != Denied:
	default:
		return true
	}
	return false
}

// Select keeps the events f matches, in their order.
func Select(events []Event, f Filter) []Event {
	var out []Event
	for _, e := range events {
		if f.Match(e) {
			out = append(out, e)
		}
	}
	return out
}
