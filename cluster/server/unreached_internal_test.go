package server

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
)

// managerOf is a manager's credentials under a new CA of its own.
func managerOf(t *testing.T, name string) *pki.Credentials {
	t.Helper()
	return dispatchertest.Credentials(t, dispatchertest.NewCA(t), name, pki.RoleManager)
}

// busyCluster answers every Status with UNAVAILABLE, as a manager does
// that was reached and could not answer.
type busyCluster struct{ pb.UnimplementedClusterServer }

func (busyCluster) Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error) {
	return nil, status.Error(codes.Unavailable, "raft: shutting down")
}

// serveCluster serves busyCluster over TLS with creds on a loopback port
// of its own, stopped when the test ends.
func serveCluster(t *testing.T, creds *pki.Credentials) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.Creds(credentials.NewTLS(creds.ServerConfig())))
	t.Cleanup(g.Stop)
	pb.RegisterClusterServer(g, busyCluster{})
	go g.Serve(ln)
	return ln.Addr().String()
}

// A call to another manager that never left this one, because nothing
// answers at its address or what answers there is of another cluster,
// fails saying so and that it may be asked again (RetryInfo): relayed to
// a client whose call was being forwarded, it must not read as that
// client's own failed handshake. A call that reached the manager keeps
// the manager's answer.
func TestACallThatNeverReachedAManagerMayBeAskedAgain(t *testing.T) {
	t.Parallel()
	ours := managerOf(t, "m1")
	s := &Server{creds: ours}
	foreign := serveCluster(t, managerOf(t, "m9"))
	reached := serveCluster(t, ours)
	nobody := "unix://" + filepath.Join(t.TempDir(), "no-manager.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func(addr string) error {
		conn, err := s.dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, err = pb.NewClusterClient(conn).Status(ctx, &pb.StatusRequest{})
		return err
	}
	for _, c := range []struct{ what, addr, cause string }{
		{"nothing listening", nobody, "Error while dialing"},
		{"another cluster's manager", foreign, "authentication handshake failed"},
	} {
		err := call(c.addr)
		st, _ := status.FromError(err)
		retry := false
		for _, d := range st.Details() {
			if _, ok := d.(*errdetails.RetryInfo); ok {
				retry = true
			}
		}
		if st.Code() != codes.Unavailable || !retry || !strings.Contains(st.Message(), "reaching the manager at "+c.addr) || !strings.Contains(st.Message(), c.cause) {
			t.Errorf("%s: %v (RetryInfo %v), want UNAVAILABLE to be asked again, naming %s and %q", c.what, err, retry, c.addr, c.cause)
		}
	}
	err := call(reached)
	st, _ := status.FromError(err)
	if st.Code() != codes.Unavailable || st.Message() != "raft: shutting down" || len(st.Details()) != 0 {
		t.Errorf("a manager reached: %v, want its own answer as it is", err)
	}
}
