package legionpb

import "google.golang.org/grpc"

// StreamWindow is how much a stream, and a connection, may have in
// flight before the receiver acknowledges it (gRPC's flow control). The
// default 64 KiB left a bulk stream, such as a volume's data, waiting on
// acknowledgements. It is a limit: nothing is allocated for it up front.
const StreamWindow = 8 << 20

// FixedWindows are the dial options of every connection Legion opens to
// a manager: flow-control windows of StreamWindow, fixed. gRPC's default
// grows the windows by estimating the bandwidth, and estimates it by
// pinging the server whenever data arrives and no ping is out: with
// small answers, close to one ping, and one answer from the server, per
// call. A manager answering a client's writes one at a time spent about
// an eighth of its CPU on them, and every node's heartbeat cost one.
func FixedWindows() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithInitialWindowSize(StreamWindow), grpc.WithInitialConnWindowSize(StreamWindow)}
}
