package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/server"
	pb "github.com/legionbsd/legion/internal/proto"
	"github.com/legionbsd/legion/internal/testcluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// nodeWorks has the node of creds take its assignments through the
// manager at addr, as its agent does (any manager serves them).
func nodeWorks(ctx context.Context, t *testing.T, addr string, creds *pki.Credentials) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(creds.ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := pb.NewDispatcherClient(conn).Assignments(sctx, &pb.AssignmentsRequest{})
	if err != nil {
		return err
	}
	_, err = stream.Recv()
	return err
}

// listAs lists Configs through the manager at addr with the credentials
// in file, read now, asking again while the cluster answers UNAVAILABLE
// for up to retry (negative: never), as the CLI does for DefaultRetry.
func listAs(ctx context.Context, addr, file string, retry time.Duration) error {
	cl, err := client.New(client.Options{Server: addr, CredentialsFile: file, Retry: retry})
	if err != nil {
		return err
	}
	defer cl.Close()
	_, _, err = cl.List(ctx, legion.KindConfig, client.ListOptions{})
	return err
}

// legion ca rotate on real daemons (two managers, a worker): every node
// renews under the new CA by itself and keeps working, the admin's
// credentials are renewed under it, and once the rotation is over a
// certificate of the old CA (the old admin bundle, a user's) is refused.
func TestCARotateKeepsNodesAndAdminAndRefusesTheOldCA(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 2, Workers: 1, Configure: func(_ int, cfg *server.Config) {
		cfg.RenewCheck = 100 * time.Millisecond
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := c.AdminFile()
	w := c.Workers[0]
	for _, m := range c.Managers {
		if err := nodeWorks(ctx, t, m.Addr, w.Server.Credentials()); err != nil {
			t.Fatalf("the worker through %s before the rotation: %v", m.Addr, err)
		}
	}
	oldAdmin := filepath.Join(t.TempDir(), "old-admin.pem")
	data, err := os.ReadFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(oldAdmin, data, 0o600); err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(t.TempDir(), "fay.pem")
	if out, err := runLegion(t, "", "user", "create", "fay", "--role", "view", "-n", "default", "-o", user, "--server", c.Managers[0].Addr, "--credentials", admin); err != nil {
		t.Fatalf("user create: %v\n%s", err, out)
	}
	oldCA := c.Managers[0].Server.Credentials().Authority()
	// A client of the old admin bundle connected before the rotation
	// ends, with a watch open: TLS checked its certificate at the
	// handshake only, so the end of the rotation must close what it opened.
	held, err := client.New(client.Options{Server: c.Managers[0].Addr, CredentialsFile: oldAdmin, Retry: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, _, err := held.List(ctx, legion.KindConfig, client.ListOptions{}); err != nil {
		t.Fatalf("the old admin bundle before the rotation: %v", err)
	}
	watch, err := held.Watch(ctx, legion.KindConfig, client.ListOptions{Namespace: "default"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	watchEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := watch.Next(); err != nil {
				watchEnded <- err
				return
			}
		}
	}()

	out, err := runLegion(t, "", "ca", "rotate", "--server", c.Managers[1].Addr, "--credentials", admin)
	if err != nil || !strings.Contains(out, "CA rotation started") || !strings.Contains(out, "legion user create") {
		t.Fatalf("ca rotate: %v\n%s", err, out)
	}
	// While it rotates, the nodes and the admin keep working.
	var status string
	// admin.pem is renewed in place: a call made with it as read just
	// before its renewal holds a certificate of the old CA, and the end
	// of the rotation closes that call's connection, as it should. Such a
	// call is tried again with the file as renewed; one made with a
	// certificate of the new CA must work.
	snapshot := filepath.Join(t.TempDir(), "admin-now.pem")
	testcluster.WaitFor(t, "every node renewed and the rotation over", 30*time.Second, func() bool {
		for _, m := range c.Managers {
			data, err := os.ReadFile(admin)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(snapshot, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := listAs(ctx, m.Addr, snapshot, -1); err != nil {
				leaf, perr := pki.ParseCert(data)
				if perr == nil && pki.IssuedBy(leaf, oldCA) {
					t.Logf("the admin's old-CA certificate through %s as the rotation ended: %v", m.Addr, err)
					return false
				}
				t.Fatalf("the admin through %s during the rotation: %v", m.Addr, err)
			}
		}
		status, err = runLegion(t, "", "ca", "status", "--server", c.Managers[0].Addr, "--credentials", admin)
		if err != nil {
			t.Fatalf("ca status: %v\n%s", err, status)
		}
		return strings.Contains(status, "none under way")
	})
	newCA := c.Managers[0].Server.Credentials().Authority()
	if newCA.Equal(oldCA) || !strings.Contains(status, pki.Digest(newCA)) {
		t.Fatalf("the CA did not change (status:\n%s)", status)
	}
	for _, n := range append(append([]*testcluster.Manager{}, c.Managers...), w) {
		if leaf := n.Server.Credentials().Current().Leaf; !pki.IssuedBy(leaf, newCA) {
			t.Errorf("node %s: its certificate is not under the new CA", n.Server.NodeID())
		}
	}
	for _, m := range c.Managers {
		if err := nodeWorks(ctx, t, m.Addr, w.Server.Credentials()); err != nil {
			t.Errorf("the worker through %s after the rotation: %v", m.Addr, err)
		}
		if err := listAs(ctx, m.Addr, admin, client.DefaultRetry); err != nil {
			t.Errorf("the renewed admin through %s: %v", m.Addr, err)
		}
		// Each manager drops the old CA at its next look (rotationCheck).
		testcluster.WaitFor(t, "the old CA refused through "+m.Addr, 5*time.Second, func() bool {
			return listAs(ctx, m.Addr, oldAdmin, -1) != nil && listAs(ctx, m.Addr, user, -1) != nil
		})
	}
	// What the old bundle opened before is closed: the watch ended, and
	// the next call needs a new handshake, which is refused.
	select {
	case err := <-watchEnded:
		t.Logf("the old admin's watch ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("a watch opened with a certificate of the old CA is still open 5 s after the rotation ended")
	}
	if _, _, err := held.List(ctx, legion.KindConfig, client.ListOptions{}); err == nil {
		t.Fatal("a client of the old admin bundle connected before the rotation ended still lists Configs")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("the old admin's call after the rotation: %v, want the handshake's refusal of its certificate", err)
	}
	// Restarted, a manager and the worker come back under the new CA.
	w.Restart()
	c.Managers[1].Restart()
	c.WaitVoters(2)
	testcluster.WaitFor(t, "the restarted worker taking its assignments", 10*time.Second, func() bool {
		return nodeWorks(ctx, t, c.Managers[1].Addr, w.Server.Credentials()) == nil
	})
	// Two managers, one just restarted: an election may be under way.
	if err := listAs(ctx, c.Managers[1].Addr, admin, client.DefaultRetry); err != nil {
		t.Errorf("the admin through the restarted manager: %v", err)
	}
}

// On a cluster of one manager every node renews at once, so the rotation
// could end, closing the old admin certificate's connections, before
// legion ca rotate, which came on one, had its answer: it must have it.
func TestCARotateOnOneManagerAnswers(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 1})
	admin, addr := c.AdminFile(), c.Managers[0].Addr
	out, err := runLegion(t, "", "ca", "rotate", "--server", addr, "--credentials", admin)
	if err != nil || !strings.Contains(out, "CA rotation started") {
		t.Fatalf("ca rotate: %v\n%s", err, out)
	}
	testcluster.WaitFor(t, "the rotation over", 30*time.Second, func() bool {
		out, err := runLegion(t, "", "ca", "status", "--server", addr, "--credentials", admin)
		if err != nil {
			t.Fatalf("ca status: %v\n%s", err, out)
		}
		return strings.Contains(out, "none under way")
	})
}

// Deleting a manager's Node says what the removal leaves: the CA key it
// held, which legion ca rotate takes away.
func TestDeleteManagerNodeSaysToRotateTheCA(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3})
	c.WaitVoters(3)
	leader := c.WaitLeader()
	m := c.Followers(leader)[0]
	gone := m.Server.NodeID()
	// Its agent registers its Node with the leader, as legion daemon's does.
	conn, err := grpc.NewClient(leader.Addr, grpc.WithTransportCredentials(credentials.NewTLS(m.Server.Credentials().ClientConfig())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	status, _ := json.Marshal(legion.NodeStatus{Addr: "127.0.0.1"})
	if _, err := pb.NewDispatcherClient(conn).Register(context.Background(), &pb.RegisterRequest{Status: status}); err != nil {
		t.Fatalf("registering the manager's Node: %v", err)
	}
	out, err := runLegion(t, "", "delete", "node", gone, "--server", c.Managers[0].Addr, "--credentials", c.AdminFile())
	if err != nil {
		t.Fatalf("delete node: %v\n%s", err, out)
	}
	if !strings.Contains(out, "node/"+gone+" deleted") || !strings.Contains(out, "CA key") || !strings.Contains(out, "legion ca rotate") {
		t.Errorf("delete of manager %s said:\n%s\nwant it deleted, and that legion ca rotate takes away the CA key it held", gone, out)
	}
}
