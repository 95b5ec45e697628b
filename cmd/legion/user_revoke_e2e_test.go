package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"google.golang.org/grpc/codes"
)

// revocationBound is how soon a user's open watch or session must end
// once its binding goes (9).
const revocationBound = 5 * time.Second

// legion user revoke on a real daemon: a user's open watch and exec end
// within 5 s, saying why, its next request is refused, and the command
// names the bindings it removed, in every namespace.
func TestUserRevokeEndsWatchAndExec(t *testing.T) {
	t.Parallel()
	n, ctx := helloCluster(t, helloApp("shell", ""))
	waitTaskOf(ctx, t, n, "shell", func(tk *legion.Task) bool { return tk.Status.State == legion.TaskRunning })
	pem := filepath.Join(t.TempDir(), "erin.pem")
	if out, err := runLegion(t, "", "user", "create", "erin", "--role", "edit", "-n", "default", "-o", pem, "--server", n.API, "--credentials", n.Admin); err != nil {
		t.Fatalf("user create: %v\n%s", err, out)
	}
	// A second binding, in another namespace, goes in the same step.
	other, _ := legion.New(legion.KindRoleBinding)
	other.GetMetadata().Name, other.GetMetadata().Namespace = "erin-too", "lab"
	other.(*legion.RoleBinding).Spec = legion.RoleBindingSpec{User: "erin", Role: legion.RoleView}
	ns, _ := legion.New(legion.KindNamespace)
	ns.GetMetadata().Name = "lab"
	if _, err := n.Client.Apply(ctx, []legion.Object{ns, other}, client.ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	erin, err := client.New(client.Options{Server: n.API, CredentialsFile: pem})
	if err != nil {
		t.Fatal(err)
	}
	defer erin.Close()

	w, err := erin.Watch(ctx, legion.KindService, client.ListOptions{Namespace: legion.DefaultNamespace}, 0)
	if err != nil {
		t.Fatalf("erin watching: %v", err)
	}
	defer w.Close()
	watchEnded := make(chan error, 1)
	go func() {
		for {
			if _, err := w.Next(); err != nil {
				watchEnded <- err
				return
			}
		}
	}()
	// A command that runs until the session ends: the server serving.
	stdout := &syncBuffer{}
	execEnded := make(chan error, 1)
	var execErr error
	waitFor(t, "erin's exec to reach the node's agent", func() bool {
		stdout = &syncBuffer{}
		go func() {
			_, err := erin.Exec(ctx, client.Target{Name: "shell"}, client.ExecOptions{
				Command: []string{"/app/server", "-listen", "127.0.0.1:0", "-say", "serving"}, Stdout: stdout})
			execEnded <- err
		}()
		for {
			select {
			case execErr = <-execEnded:
				if !strings.Contains(execErr.Error(), "is not connected to this manager") {
					t.Fatalf("erin's exec: %v", execErr)
				}
				return false
			case <-time.After(10 * time.Millisecond):
				if strings.Contains(stdout.String(), "serving") {
					return true
				}
			}
		}
	})

	out, err := runLegion(t, "", "user", "revoke", "erin", "--server", n.API, "--credentials", n.Admin)
	if err != nil {
		t.Fatalf("user revoke: %v\n%s", err, out)
	}
	revoked := time.Now()
	if !strings.Contains(out, "user/erin revoked") || !strings.Contains(out, "default/erin") || !strings.Contains(out, "lab/erin-too") {
		t.Errorf("user revoke said %q, want both bindings named", out)
	}
	for _, s := range []struct {
		what  string
		ended chan error
	}{{"watch", watchEnded}, {"exec", execEnded}} {
		select {
		case err := <-s.ended:
			if client.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), s.what+" ended") || !strings.Contains(err.Error(), "erin") {
				t.Errorf("erin's %s ended with %v, want PERMISSION_DENIED saying why", s.what, err)
			}
		case <-time.After(revocationBound - time.Since(revoked)):
			t.Fatalf("erin's %s still open %s after the revocation", s.what, revocationBound)
		}
	}
	if _, _, err := erin.List(ctx, legion.KindService, client.ListOptions{Namespace: legion.DefaultNamespace}); client.Code(err) != codes.PermissionDenied {
		t.Errorf("erin listing after the revocation: %v, want PERMISSION_DENIED", err)
	}
	bindings, _, err := n.Client.List(ctx, legion.KindRoleBinding, client.ListOptions{AllNamespaces: true})
	if err != nil || len(bindings) != 0 {
		t.Errorf("bindings left: %d (%v)", len(bindings), err)
	}
	if _, err := runLegion(t, "", "user", "revoke", "erin", "--server", n.API, "--credentials", n.Admin); err == nil || !strings.Contains(err.Error(), "nothing to revoke") {
		t.Errorf("revoking again: %v, want a refusal saying there is nothing to revoke", err)
	}
	if _, err := runLegion(t, "", "user", "revoke", "erin", "--server", n.API, "--credentials", pem); client.Code(err) != codes.PermissionDenied {
		t.Errorf("a user revoking: %v, want PERMISSION_DENIED", err)
	}
}
