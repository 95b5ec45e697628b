package dispatcher_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store"
	legionpb "github.com/legionbsd/legion/internal/proto"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A jails node without its ZFS root is refused at registration, naming
// the fix, and gets no Node and no subnet; one with it, and a process
// node (no ZFS), are admitted and their report is kept (D7).
func TestRegisterRefusesJailsNodeWithoutZFSRoot(t *testing.T) {
	t.Parallel()
	m := dispatchertest.Start(t)
	bare := dial(t, m, "bare", pki.RoleWorker)
	data, err := json.Marshal(legion.NodeStatus{Hostname: "bare", Runtime: legion.NodeRuntimeJails,
		Platform: legion.Platform{OS: "freebsd", Arch: "amd64"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = bare.Register(ctxT(t), &legionpb.RegisterRequest{Status: data})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "--zfs-root") || !strings.Contains(err.Error(), "zpool create") {
		t.Fatalf("a jails node without a ZFS root: %v, want FailedPrecondition naming --zfs-root and zpool create", err)
	}
	if _, _, err := m.Store.Get(legion.KindNode, "", "bare"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused node was recorded: %v", err)
	}

	register(t, dial(t, m, "zfs", pki.RoleWorker), legion.NodeStatus{Hostname: "zfs", Runtime: legion.NodeRuntimeJails, ZFSRoot: "zroot/legion"})
	if n := getNode(t, m.Store, "zfs"); n.Status.Runtime != legion.NodeRuntimeJails || n.Status.ZFSRoot != "zroot/legion" {
		t.Fatalf("the node's report was not kept: runtime %q zfsRoot %q", n.Status.Runtime, n.Status.ZFSRoot)
	}
	register(t, dial(t, m, "proc", pki.RoleWorker), legion.NodeStatus{Hostname: "proc", Runtime: legion.NodeRuntimeProcess})
	if n := getNode(t, m.Store, "proc"); n.Status.PodCIDR == "" {
		t.Fatalf("a process node needs no ZFS, yet got no subnet: %+v", n.Status)
	}
}
