package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/rbac"
	"github.com/legionbsd/legion/cluster/store"
	pb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RevokeUser removes every RoleBinding of a user, in every namespace, in
// one request to the leader: the user's next request is refused, and its
// open watches and sessions end (pki.Recheck). Its certificate stays
// valid but gives no right; only the cluster admin revokes.
func (c *clusterService) RevokeUser(ctx context.Context, req *pb.RevokeUserRequest) (*pb.RevokeUserResponse, error) {
	if userOf(ctx) != nil {
		return nil, status.Error(codes.PermissionDenied, "only the cluster admin revokes users")
	}
	if err := legion.ValidName(req.User); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "user name %q: %v", req.User, err)
	}
	st, conn, fctx, err := c.s.leader(ctx)
	if err != nil {
		return nil, err
	}
	if conn != nil {
		return pb.NewClusterClient(conn).RevokeUser(fctx, req)
	}
	if err := st.Barrier(ctx); err != nil {
		return nil, toStatus(err)
	}
	bindings, err := rbac.BindingsOf(st.List, req.User)
	if err != nil {
		return nil, toStatus(err)
	}
	if len(bindings) == 0 {
		return nil, status.Errorf(codes.NotFound, "user %s has no RoleBinding in any namespace: nothing to revoke", req.User)
	}
	writes := make([]store.Write, len(bindings))
	for i, b := range bindings {
		writes[i] = store.Write{Object: b, Delete: true, Options: store.WriteOptions{Precondition: store.Precondition{Version: b.Metadata.Version}}}
	}
	out := &pb.RevokeUserResponse{}
	var failed []string
	for i, err := range st.WriteAll(ctx, writes) {
		name := bindings[i].Metadata.Namespace + "/" + bindings[i].Metadata.Name
		switch {
		case err == nil:
			out.Removed = append(out.Removed, name)
		case errors.Is(err, store.ErrNotFound):
			// Deleted meanwhile: gone all the same.
		default:
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
		}
	}
	c.s.log.Info("user revoked: its RoleBindings removed", "user", req.User, "removed", out.Removed)
	if len(failed) > 0 {
		return nil, status.Errorf(codes.Aborted, "user %s: removed %d RoleBindings (%s), not %s: run legion user revoke again",
			req.User, len(out.Removed), strings.Join(out.Removed, ", "), strings.Join(failed, "; "))
	}
	return out, nil
}
