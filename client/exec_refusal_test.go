package client

import (
	"io"
	"testing"

	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// refusedStream is an exec stream the manager ended before it read the
// start: gRPC fails the send with io.EOF and gives the status to Recv.
type refusedStream struct{ why error }

func (refusedStream) Send(*pb.ExecInput) error        { return io.EOF }
func (refusedStream) CloseSend() error                { return nil }
func (s refusedStream) Recv() (*pb.ExecOutput, error) { return nil, s.why }

// An exec the manager refuses at once says why (the status), not EOF.
func TestExecRefusedBeforeItsStartSaysWhy(t *testing.T) {
	why := status.Error(codes.PermissionDenied, "exec: not allowed for a worker")
	_, err := runExec(refusedStream{why}, &pb.ExecStart{Command: []string{"cat"}}, nil, nil, io.Discard, io.Discard)
	if status.Code(err) != codes.PermissionDenied || status.Convert(err).Message() != "exec: not allowed for a worker" {
		t.Fatalf("got %v, want the refusal: %v", err, why)
	}
}
