package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A user's write sent to a follower goes on to the leader under the
// follower's manager certificate; the leader must still decide it as the
// user's, with the checks made for users only (here: publishing a port),
// not as a manager's. A caller that is not a manager cannot name a user
// for itself.
func TestAUsersCallThroughAFollowerIsDecidedAsTheUsers(t *testing.T) {
	t.Parallel()
	m, f, admin := joinedPair(t, "manager")
	ctx := context.Background()
	if _, err := admin.Apply(ctx, []legion.Object{namespaceObj("team"), roleBinding("team", "mallory", legion.RoleEdit)}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the binding on the follower", 10*time.Second, func() bool {
		_, _, err := f.s.store().Get(legion.KindRoleBinding, "team", "mallory")
		return err == nil
	})
	viaFollower := userClient(t, admin, f.addr, "mallory")
	apply := func(c *client.Client, ctx context.Context, yaml string) error {
		_, err := c.Apply(ctx, mustParse(t, yaml), client.ApplyOptions{})
		return err
	}
	// The follower's own check passes the user's rights (edit in team);
	// the leader's refuses what only users are refused.
	err := apply(viaFollower, ctx, publishing("team", "ssh", "tcp", "ingress", 30022))
	if client.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "30022/tcp would be taken on the nodes, which are not namespace team's") {
		t.Fatalf("a user publishing a port through a follower: %v, want PERMISSION_DENIED as through the leader", err)
	}
	if _, _, err := m.s.store().Get(legion.KindService, "team", "ssh"); err == nil {
		t.Fatal("the refused service was written")
	}
	// What the user may do goes through: the leader found the user's
	// own bindings.
	if _, err := viaFollower.ApplyOne(ctx, configObj("team", "c", "x"), client.ApplyOptions{}); err != nil {
		t.Fatalf("a user's allowed write through a follower: %v", err)
	}
	// An admin naming a user in the headers stays the admin: only a
	// manager's forwarded call is taken as a user's.
	forged := metadata.AppendToOutgoingContext(ctx, legionpb.ForwardedKey, "x", legionpb.ForwardedUserKey, "mallory")
	if err := apply(admin, forged, publishing("team", "ssh2", "tcp", "ingress", 30023)); err != nil {
		t.Fatalf("the admin's write with a user named in its headers: %v, want it taken as the admin's", err)
	}
}

// A read forwarded to the leader is asked once more only when its
// connection closed under it before any answer came: not after part of a
// list was relayed, not for another failure, not once the caller left.
func TestReadAgain(t *testing.T) {
	t.Parallel()
	closed := status.Error(codes.Unavailable, "error reading from server: EOF")
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		ctx      context.Context
		err      error
		answered bool
		want     bool
	}{
		{context.Background(), closed, false, true},
		{context.Background(), closed, true, false},
		{context.Background(), status.Error(codes.NotFound, "no such"), false, false},
		{context.Background(), nil, false, false},
		{gone, closed, false, false},
	} {
		if got := readAgain(c.ctx, c.err, c.answered); got != c.want {
			t.Errorf("readAgain(%v, answered %v, ctx %v) = %v, want %v", c.err, c.answered, c.ctx.Err(), got, c.want)
		}
	}
}
