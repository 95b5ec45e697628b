package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion/client"
)

// A setting comes from the flag, else the environment, else the context,
// else the default.
func TestPickOrder(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, flag string
		given      bool
		env, ctx   string
		want       string
	}{
		{"flag wins", "f", true, "e", "c", "f"},
		{"flag given empty wins", "", true, "e", "c", ""},
		{"env over context", "dflt", false, "e", "c", "e"},
		{"context over default", "dflt", false, "", "c", "c"},
		{"default", "dflt", false, "", "", "d"},
	} {
		if got := pick(c.flag, c.given, c.env, c.ctx, "d"); got != c.want {
			t.Errorf("%s: pick = %q, want %q", c.name, got, c.want)
		}
	}
}

// The same order, through a command: the settings file's current context,
// LEGION_SERVER over it, --server over both; --context picks another.
func TestSettingsResolution(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	for _, k := range []string{envServer, envCredentials, envNamespace, envRequestTimeout, envContext} {
		t.Setenv(k, "")
	}
	t.Setenv(envConfig, cfg)
	mustRun := func(args ...string) string {
		t.Helper()
		out, err := runLegion(t, "", args...)
		if err != nil {
			t.Fatalf("legion %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	line := func(out, label string) string {
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, label+":") {
				return strings.TrimSpace(strings.TrimPrefix(l, label+":"))
			}
		}
		t.Fatalf("no %s line in\n%s", label, out)
		return ""
	}
	if got := line(mustRun("context", "show"), "Server"); got != client.DefaultServer+" (default)" {
		t.Fatalf("no context: server %q", got)
	}
	mustRun("context", "set", "one", "--server", "10.0.0.1:7470", "--credentials", "one.pem", "-n", "shop", "--request-timeout", "45s")
	mustRun("context", "set", "two", "--server", "10.0.0.2:7470")
	out := mustRun("context", "show")
	if line(out, "Server") != "10.0.0.1:7470 (context)" || line(out, "Namespace") != "shop (context)" ||
		line(out, "Request timeout") != "45s (context)" || !strings.HasSuffix(line(out, "Credentials"), "one.pem (context)") {
		t.Fatalf("the first context set is current:\n%s", out)
	}
	t.Setenv(envServer, "10.0.0.3:7470")
	if got := line(mustRun("context", "show"), "Server"); got != "10.0.0.3:7470 ("+envServer+")" {
		t.Fatalf("env over context: server %q", got)
	}
	if got := line(mustRun("context", "show", "--server", "10.0.0.4:7470"), "Server"); got != "10.0.0.4:7470 (--server)" {
		t.Fatalf("flag over env: server %q", got)
	}
	t.Setenv(envServer, "")
	if got := line(mustRun("context", "show", "--context", "two"), "Server"); got != "10.0.0.2:7470 (context)" {
		t.Fatalf("--context two: server %q", got)
	}
	if _, err := runLegion(t, "", "context", "show", "--context", "three"); err == nil || !strings.Contains(err.Error(), `context "three"`) {
		t.Fatalf("an unknown --context: %v", err)
	}

	// A command's -n takes the context's namespace; the flag still wins.
	ns := newRootCommand()
	ns.SetArgs([]string{"get", "services"})
	get, _, err := ns.Find([]string{"get", "services"})
	if err != nil {
		t.Fatal(err)
	}
	if err := get.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	if err := loadSettings(get, nil); err != nil {
		t.Fatal(err)
	}
	if got := get.Flags().Lookup("namespace").Value.String(); got != "shop" {
		t.Fatalf("get's --namespace from the context: %q", got)
	}
	get, _, _ = newRootCommand().Find([]string{"get"})
	if err := get.ParseFlags([]string{"-n", "other"}); err != nil {
		t.Fatal(err)
	}
	if err := loadSettings(get, nil); err != nil {
		t.Fatal(err)
	}
	if got := get.Flags().Lookup("namespace").Value.String(); got != "other" {
		t.Fatalf("get -n other with a context: %q", got)
	}
}

// ls and use round-trip through the file under $HOME when nothing names
// another: use changes the current context, rm drops it.
func TestContextLsUseInHome(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv(envConfig, "")
	t.Setenv(envContext, "")
	for _, args := range [][]string{
		{"context", "set", "a", "--server", "10.0.0.1:7470"},
		{"context", "set", "b", "--server", "10.0.0.2:7470"},
	} {
		if out, err := runLegion(t, "", args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	if _, err := os.Stat(filepath.Join(home, ".config", "legion", "config.yaml")); err != nil {
		t.Fatalf("the settings file is not under HOME: %v", err)
	}
	current := func() string {
		t.Helper()
		out, err := runLegion(t, "", "context", "ls")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(out, "\n")[1:] {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "*" {
				return f[1]
			}
		}
		return ""
	}
	if got := current(); got != "a" {
		t.Fatalf("current after the first set: %q", got)
	}
	if out, err := runLegion(t, "", "context", "use", "b"); err != nil || out != "context/b in use\n" {
		t.Fatalf("context use b: %v %q", err, out)
	}
	if got := current(); got != "b" {
		t.Fatalf("current after use b: %q", got)
	}
	// context ls takes -o as every listing does.
	if out, err := runLegion(t, "", "context", "ls", "-o", "name"); err != nil || out != "context/a\ncontext/b\n" {
		t.Errorf("context ls -o name: %v %q", err, out)
	}
	if out, err := runLegion(t, "", "context", "ls", "-o", "jsonpath={[?(@.current==true)].name}"); err != nil || out != "b" {
		t.Errorf("context ls -o jsonpath of the current one: %v %q", err, out)
	}
	if _, err := runLegion(t, "", "context", "use", "nope"); err == nil {
		t.Fatal("context use of an unknown name succeeded")
	}
	if out, err := runLegion(t, "", "context", "rm", "b"); err != nil || out != "context/b deleted\n" {
		t.Fatalf("context rm b: %v %q", err, out)
	}
	if got := current(); got != "" {
		t.Fatalf("current after removing it: %q", got)
	}
	// XDG_CONFIG_HOME, when set, holds the file instead.
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	if _, err := runLegion(t, "", "context", "set", "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(xdg, "legion", "config.yaml")); err != nil {
		t.Fatalf("XDG_CONFIG_HOME not honoured: %v", err)
	}
}

// A cluster made by up or init gets a context named after its directory;
// one of that name holding another cluster's credentials is kept.
func TestRememberClusterKeepsOthers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	root := newRootCommand()
	ctxCmd, _, _ := root.Find([]string{"context", "ls"})
	if err := ctxCmd.ParseFlags([]string{"--config", cfg}); err != nil {
		t.Fatal(err)
	}
	proj := filepath.Join(dir, "shop")
	first, err := rememberCluster(ctxCmd, filepath.Join(proj, ".legion"), "127.0.0.1:7470", filepath.Join(proj, ".legion", "admin.pem"))
	if err != nil || !strings.Contains(first, "Context shop added") {
		t.Fatalf("first: %v %q", err, first)
	}
	again, err := rememberCluster(ctxCmd, filepath.Join(proj, ".legion"), "127.0.0.1:7471", filepath.Join(proj, ".legion", "admin.pem"))
	if err != nil || !strings.Contains(again, "Context shop updated") {
		t.Fatalf("same cluster again: %v %q", err, again)
	}
	other := filepath.Join(dir, "elsewhere", "shop")
	third, err := rememberCluster(ctxCmd, filepath.Join(other, ".legion"), "127.0.0.1:7480", filepath.Join(other, ".legion", "admin.pem"))
	if err != nil || !strings.Contains(third, "Context shop-2 added") {
		t.Fatalf("another cluster of the same name: %v %q", err, third)
	}
	c, err := readConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c.CurrentContext != "shop-2" || len(c.Contexts) != 2 || c.find("shop").Server != "127.0.0.1:7471" || c.find("shop-2").Server != "127.0.0.1:7480" {
		t.Fatalf("settings after three clusters: %+v", c)
	}
}

// A broken settings file is said, naming it, before a command runs.
func TestBrokenSettingsFile(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("contexts:\n  - server: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := runLegion(t, "", "context", "ls", "--config", cfg); err == nil || !strings.Contains(err.Error(), cfg) || !strings.Contains(err.Error(), "no name") {
		t.Fatalf("a context without a name: %v", err)
	}
	// none: no file read, none to edit.
	if out, err := runLegion(t, "", "context", "show", "--config", cfg); err == nil {
		t.Fatalf("a broken file did not stop context show:\n%s", out)
	}
	if _, err := runLegion(t, "", "context", "show", "--config", noConfig); err != nil {
		t.Fatalf("context show --config none: %v", err)
	}
	if _, err := runLegion(t, "", "context", "ls", "--config", noConfig); err == nil || !strings.Contains(err.Error(), "no settings file") {
		t.Fatalf("context ls --config none: %v", err)
	}
}
