package main

import (
	"context"
	"fmt"

	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/codes"
)

// joinDefaultDaemon is where join looks for the daemon to join when not
// told (a variable so tests need not use the well-known port).
var joinDefaultDaemon = client.DefaultServer

// checkJoinDaemon makes sure that, with --daemon left out, the default
// address holds a daemon that can join: a fresh one. Otherwise it says
// that join needs --daemon, instead of dialling on and failing with a
// transport error. It asks once, without waiting for anything to start.
func checkJoinDaemon(ctx context.Context, addr string) error {
	cl, err := client.New(client.Options{Server: addr, Retry: -1})
	if err != nil {
		return err
	}
	defer cl.Close()
	st, err := cl.Status(ctx)
	switch {
	case client.Code(err) == codes.Unavailable:
		// The client's own hint names --server, which join does not dial.
		return fmt.Errorf("join: no daemon answers at %s, the default: pass --daemon ADDR, the API address of the fresh daemon to join (legion daemon --listen)", addr)
	case err != nil:
		// A daemon in a cluster takes no call without its certificate.
		return fmt.Errorf("join: the daemon at %s, the default, is not a fresh one: it already belongs to a cluster (%v): pass --daemon ADDR, the API address of a fresh daemon to join", addr, err)
	case st.Initialized:
		return fmt.Errorf("join: the daemon at %s, the default, already belongs to a cluster (node %s, %s): pass --daemon ADDR, the API address of a fresh daemon to join", addr, st.NodeID, st.Role)
	}
	return nil
}
