package server

import (
	"time"

	"github.com/legionbsd/legion/cluster/pki"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// initCA is the root CA a new cluster gets: the one the request brings
// (legion init --ca-cert --ca-key), checked, or else a new one. The key
// travels in the request: init is taken only from the daemon's own host,
// over TLS.
func initCA(req *pb.InitRequest, now time.Time) (*pki.CA, error) {
	if ca, err := importedCA(req.GetCaCert(), req.GetCaKey(), now); ca != nil || err != nil {
		return ca, err
	}
	ca, err := pki.NewCA(now)
	if err != nil {
		return nil, toStatus(err)
	}
	return ca, nil
}

// importedCA reads the CA a request brings (certificate and key, PEM):
// nil when it brings none, InvalidArgument when only one of the two or
// when pki.ImportCA refuses them.
func importedCA(certPEM, keyPEM []byte, now time.Time) (*pki.CA, error) {
	switch {
	case len(certPEM) == 0 && len(keyPEM) == 0:
		return nil, nil
	case len(certPEM) == 0:
		return nil, status.Error(codes.InvalidArgument, "CA key given without its certificate: expected both (ca_cert and ca_key) or neither")
	case len(keyPEM) == 0:
		return nil, status.Error(codes.InvalidArgument, "CA certificate given without its key: expected both (ca_cert and ca_key) or neither")
	}
	ca, err := pki.ImportCA(certPEM, keyPEM, now)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return ca, nil
}
