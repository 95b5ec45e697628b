package main

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testcluster"
)

// join without --daemon, when the default address holds no daemon or one
// already in a cluster, says that it needs --daemon instead of a
// transport error.
func TestJoinWithoutDaemonSaysWhy(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{Managers: 1, Leader: true})
	token := c.Token("worker")
	defer func(d string) { joinDefaultDaemon = d }(joinDefaultDaemon)
	for _, tc := range []struct {
		name, addr, want string
	}{
		{"nothing there", testaddr.Loopback(t), "no daemon answers at"},
		{"a daemon in a cluster", c.Managers[0].Addr, "already belongs to a cluster"},
	} {
		joinDefaultDaemon = tc.addr
		out, err := runLegion(t, "", "join", token, "--server", c.Managers[0].Addr)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--daemon ADDR") || !strings.Contains(err.Error(), tc.addr) {
			t.Errorf("%s: join: %v\n%s", tc.name, err, out)
		}
	}
}
