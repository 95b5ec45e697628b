package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// legion user create writes a user's credentials and binds its role; the
// user then reads in its namespace and is refused writes.
func TestUserCreate(t *testing.T) {
	n := startCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(args ...string) (string, error) {
		out := &syncBuffer{}
		root := rootWith(out, &syncBuffer{}, append(args, "--server", n.API)...)
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	pem := filepath.Join(t.TempDir(), "dana.pem")
	out, err := run("user", "create", "dana", "--role", "view", "-n", "default", "-o", pem, "--credentials", n.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "user/dana created (credentials in ") || !strings.Contains(out, "rolebinding/dana created (view in namespace default)\n") {
		t.Errorf("user create said %q", out)
	}
	if fi, err := os.Stat(pem); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials file: %v %v", fi, err)
	}
	if _, err := run("get", "configs", "--credentials", pem); err != nil {
		t.Errorf("a viewer listing configs: %v", err)
	}
	// A user's every namespace is those where it has a role: an empty
	// listing says so, rather than that the cluster has none.
	shop := filepath.Join(t.TempDir(), "shop.yaml")
	os.WriteFile(shop, []byte("apiVersion: legion/v1\nkind: Config\nmetadata: {name: c, namespace: shop}\nspec: {text: x}\n---\n"+
		"apiVersion: legion/v1\nkind: Namespace\nmetadata: {name: shop}\n"), 0o644)
	if _, err := run("apply", "-f", shop, "--credentials", n.Admin); err != nil {
		t.Fatal(err)
	}
	said := func(args ...string) string {
		t.Helper()
		stderr := &syncBuffer{}
		if err := rootWith(&syncBuffer{}, stderr, append(args, "--server", n.API)...).ExecuteContext(ctx); err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		return stderr.String()
	}
	for _, c := range []struct{ args, want string }{
		{"get configs -A", "No configs found in the namespaces where user dana has a role.\n"},
		{"get all -A", "No services, jobs, cron jobs or tasks found in the namespaces where user dana has a role.\n"},
		{"tasks -A", "No tasks found in the namespaces where user dana has a role.\n"},
		{"volume ls -A", "No volumes found in the namespaces where user dana has a role.\n"},
		{"events", "No events found in the namespaces where user dana has a role.\n"},
		{"get ns", "No Namespace objects found in the namespaces where user dana has a role.\n"},
		{"get configs", "No configs found.\n"}, // one namespace: all of it
	} {
		if got := said(append(strings.Fields(c.args), "--credentials", pem)...); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s, as dana: %q, want %q", c.args, got, c.want)
		}
	}
	if got := said("get", "volumes", "-A", "--credentials", n.Admin); got != "No volumes found.\n" {
		t.Errorf("get volumes -A, as the admin: %q", got)
	}
	manifest := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(manifest, []byte("apiVersion: legion/v1\nkind: Config\nmetadata: {name: c}\nspec: {text: x}\n"), 0o644)
	if _, err := run("apply", "-f", manifest, "--credentials", pem); err == nil || !strings.Contains(err.Error(), "needs edit") {
		t.Errorf("a viewer applying: %v", err)
	}
	// Following or forwarding in a namespace the user has no role in is
	// refused at once: not waited on as an election would be, nor
	// listened for as if connections could be forwarded.
	var ee *exitError
	if out, err := run("rollout", "status", "web", "-n", "shop", "--timeout", "30s", "--credentials", pem); errors.As(err, &ee) ||
		err == nil || !strings.Contains(err.Error(), "user dana has no role in namespace shop") {
		t.Errorf("rollout status in another namespace: %v\n%s", err, out)
	}
	if out, err := run("port-forward", "web", "0:80", "-n", "shop", "--credentials", pem); err == nil ||
		!strings.Contains(err.Error(), "user dana has no role in namespace shop") || strings.Contains(out, "Forwarding") {
		t.Errorf("port-forward in another namespace: %v\n%s", err, out)
	}
	if _, err := run("user", "create", "dana", "-o", pem, "--credentials", n.Admin); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("overwriting credentials: %v", err)
	}
}
