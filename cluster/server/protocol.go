package server

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// protocolKey carries the protocol a manager speaks on every Raft call
// and answer (3.8 "Versions"). A peer that sends none speaks protocol 1.
const protocolKey = "legion-protocol"

// OldestProtocol is the oldest protocol this build works with.
const OldestProtocol = 1

func withProtocol(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, protocolKey, strconv.Itoa(Protocol))
}

func protocolOf(md metadata.MD) int {
	v := md.Get(protocolKey)
	if len(v) == 0 {
		return 1
	}
	n, err := strconv.Atoi(v[0])
	if err != nil {
		return 0
	}
	return n
}

// checkProtocol refuses a peer this build cannot work with, saying which
// side to upgrade first, and answers with this build's protocol.
func checkProtocol(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	p := protocolOf(md)
	grpc.SetHeader(ctx, metadata.Pairs(protocolKey, strconv.Itoa(Protocol)))
	switch {
	case p < OldestProtocol:
		return status.Errorf(codes.FailedPrecondition, "raft: the calling manager speaks protocol %d, this one needs at least %d: upgrade the calling manager first", p, OldestProtocol)
	case p > Protocol:
		return status.Errorf(codes.FailedPrecondition, "raft: the calling manager speaks protocol %d, this one at most %d: upgrade this manager first", p, Protocol)
	}
	return nil
}
