// Package legionpb is the generated protobuf and gRPC code of a manager's
// port (legion.proto). The generated files are committed, so a build
// needs no protoc; see README.md to regenerate them.
package legionpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative legion.proto
