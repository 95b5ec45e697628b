package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// user ls lists each user its RoleBindings name, with its roles, for the
// cluster admin over every namespace and for a namespace user over its
// own, saying so; a revoked user is gone from it.
func TestUserList(t *testing.T) {
	t.Parallel()
	s, run := initDaemon(t)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"create", "namespace", "shop"},
		{"user", "create", "ann", "--role", "edit", "-n", "default", "-o", filepath.Join(dir, "ann.pem")},
		{"user", "create", "carl", "--role", "admin", "-n", "shop", "-o", filepath.Join(dir, "carl.pem")},
	} {
		if out, err := run("", args...); err != nil {
			t.Fatalf("legion %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := run("apiVersion: legion/v1\nkind: RoleBinding\nmetadata: {name: ann-shop, namespace: shop}\nspec: {user: ann, role: view}\n", "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	out, err := run("", "user", "ls", "-o", "wide")
	want := "USER  ROLES                          ROLEBINDINGS\n" +
		"ann   edit in default, view in shop  default/ann, shop/ann-shop\n" +
		"carl  admin in shop                  shop/carl\n"
	if err != nil || out != want {
		t.Fatalf("user ls -o wide: %v\n%s\nwant\n%s", err, out, want)
	}
	js, err := run("", "user", "ls", "-o", "json")
	var users []userView
	if err != nil || json.Unmarshal([]byte(js), &users) != nil || len(users) != 2 || len(users[0].Roles) != 2 || users[0].Roles[1].Binding != "ann-shop" {
		t.Fatalf("user ls -o json: %v\n%s", err, js)
	}
	// carl, admin in shop, sees shop's bindings only, and is told so.
	var carlOut, carlErr syncBuffer
	err = rootWith(&carlOut, &carlErr, "user", "ls", "--server", s.Addr(), "--credentials", filepath.Join(dir, "carl.pem")).Execute()
	if err != nil || carlOut.String() != "USER  ROLES\nann   view in shop\ncarl  admin in shop\n" ||
		!strings.Contains(carlErr.String(), "note: from the RoleBindings in the namespaces where user carl has a role") {
		t.Fatalf("user ls as carl: %v\n%s%s", err, carlOut.String(), carlErr.String())
	}
	if out, err := run("", "user", "revoke", "ann"); err != nil {
		t.Fatalf("user revoke: %v\n%s", err, out)
	}
	if out, err := run("", "user", "list"); err != nil || out != "USER  ROLES\ncarl  admin in shop\n" {
		t.Fatalf("user list after revoking ann: %v\n%s", err, out)
	}
}
