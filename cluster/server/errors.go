package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/store"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// notApplied is UNAVAILABLE for a call refused before it could change
// anything (no leader, a follower that may not forward it): its RetryInfo
// tells a client it may send the call again as it is. Any other
// UNAVAILABLE after a write began (leadership lost while committing, no
// quorum in time, the manager stopping) leaves the write's outcome
// unknown: it may still apply, so a client sending it again could apply
// it twice, the second time after later writes.
func notApplied(format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	st, err := status.New(codes.Unavailable, msg).WithDetails(&errdetails.RetryInfo{})
	if err != nil {
		return status.Error(codes.Unavailable, msg)
	}
	return st.Err()
}

// toStatus turns a store or admission error into the gRPC status the
// client acts on.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var el legion.ErrorList
	switch {
	case errors.As(err, &el):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, store.ErrTooLarge):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, store.ErrLogFull):
		// The manager's disk is full: nothing a retry elsewhere fixes
		// until space is freed, which the message names.
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, store.ErrConflict):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, store.ErrNotLeader):
		// Raft refused the write before appending it.
		return notApplied("no leader: an election is in progress")
	case errors.Is(err, store.ErrNoQuorum), errors.Is(err, store.ErrClosed):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, store.ErrCompacted):
		return status.Error(codes.OutOfRange, err.Error())
	case errors.Is(err, store.ErrReset):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
