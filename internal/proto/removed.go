package legionpb

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NodeRemovedReason marks (as an ErrorInfo detail) the refusal of a
// certificate issued to a node before it was removed from the cluster,
// so the node can tell that refusal from any other: it then stops what
// it runs, as its tasks were given to other nodes.
const NodeRemovedReason = "NODE_REMOVED"

// errorDomain is the ErrorInfo domain of Legion's own reasons.
const errorDomain = "legion"

// NodeRemoved is the refusal (PermissionDenied) of a removed node's
// certificate, saying msg.
func NodeRemoved(msg string) error {
	st := status.New(codes.PermissionDenied, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: NodeRemovedReason, Domain: errorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// NodeRemovedMessage is the managers' message when err (or an error it
// wraps) is a NodeRemoved refusal; ok is false for any other error.
func NodeRemovedMessage(err error) (msg string, ok bool) {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return "", false
	}
	st := se.GRPCStatus()
	if st.Code() != codes.PermissionDenied {
		return "", false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == NodeRemovedReason && info.GetDomain() == errorDomain {
			return st.Message(), true
		}
	}
	return "", false
}
