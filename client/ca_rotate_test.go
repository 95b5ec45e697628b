package client_test

import (
	"context"
	"strings"
	"testing"

	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/pki/pkitest"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc"
)

// olderCluster answers RotateCA as a manager from before a CA could be
// given: it ignores the given one and rotates to one of its own.
type olderCluster struct {
	pb.UnimplementedClusterServer
}

func (olderCluster) RotateCA(context.Context, *pb.RotateCARequest) (*pb.RotateCAResponse, error) {
	return &pb.RotateCAResponse{Started: true, Digest: "sha256:0000", PreviousDigest: "sha256:1111"}, nil
}

// A rotation to a CA given that the manager answers with another CA is
// not reported as the given one taken.
func TestRotateCAToSaysWhenAnOlderManagerMadeItsOwn(t *testing.T) {
	t.Parallel()
	c := serveScripted(t, func(g *grpc.Server) { pb.RegisterClusterServer(g, olderCluster{}) }, -1)
	ca := pkitest.NewCA(t, pkitest.Options{})
	certPEM, keyPEM := ca.CertPEM(), ca.KeyPEM(t)
	_, err := c.RotateCATo(context.Background(), certPEM, keyPEM)
	given, _ := pki.ParseCert(certPEM)
	if err == nil || !strings.Contains(err.Error(), "rotated to a CA of their own (sha256:0000), not the one given ("+pki.Digest(given)+")") {
		t.Fatalf("RotateCATo answered with another CA: %v, want it said", err)
	}
}
