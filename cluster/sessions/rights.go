package sessions

import (
	"context"
	"time"

	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/rbac"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// endWhenDenied reads a user's RoleBindings again every pki.Recheck until
// ctx ends and, once they no longer allow v in namespace, ends the
// session through end, saying why (9: within 5 s of the binding's
// removal). The cluster admin and managers are never cut off.
func (s *Service) endWhenDenied(ctx context.Context, id pki.Identity, v rbac.Verb, what, namespace string, end context.CancelCauseFunc) {
	if id.Role != pki.RoleUser {
		return
	}
	t := time.NewTicker(pki.Recheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		objs := s.src()
		if objs == nil {
			continue
		}
		if err := allowed(objs, id, v, what, namespace); status.Code(err) == codes.PermissionDenied {
			end(status.Errorf(codes.PermissionDenied, "%s ended: %s", what, status.Convert(err).Message()))
			return
		}
	}
}
