package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runLegion runs the CLI with args and returns what it printed.
func runLegion(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := rootWith(&out, &out, args...)
	root.SetIn(strings.NewReader(stdin))
	err := execute(root)
	return out.String(), err
}

func TestValidateExamplesPrintsNormalisedObjects(t *testing.T) {
	t.Parallel()
	out, err := runLegion(t, "", "validate", "-f", "../../examples")
	if err != nil {
		t.Fatalf("validate examples: %v", err)
	}
	for _, want := range []string{"kind: Service", "kind: CronJob", "kind: ImagePolicy", "cpu: 500m", "host: shop.example.org", "stopGracePeriod: 10s"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if n := strings.Count(out, "\n---\n"); n < 10 {
		t.Errorf("got %d document separators, want one between each of the examples' objects", n)
	}
	js, err := runLegion(t, "", "validate", "-o", "json", "-f", "../../examples/jobs.yaml")
	if err != nil || !strings.Contains(js, `"kind": "Job"`) || !strings.Contains(js, `"backoffLimit": 3`) {
		t.Fatalf("json output: %v\n%s", err, js)
	}
}

func TestValidateReportsEveryErrorAndExits1(t *testing.T) {
	t.Parallel()
	bad := `apiVersion: legion/v1
kind: Service
metadata: {name: web}
spec:
  replicas: 70000
  pod:
    containers: [{name: web, imagee: nginx}]
---
apiVersion: legion/v1
kind: Secret
metadata: {name: ok}
spec: {text: fine}
`
	out, err := runLegion(t, bad, "validate", "-f", "-")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("want exit 1, got %v", err)
	}
	for _, want := range []string{
		"-: document 1 (Service default/web): spec.replicas: 70000 is out of range",
		"spec.pod.containers[0].imagee: unknown field",
		"spec.pod.containers[0].image: missing",
	} {
		if !strings.Contains(ee.msg, want) {
			t.Errorf("errors lack %q:\n%s", want, ee.msg)
		}
	}
	if strings.Contains(ee.msg, "Secret") {
		t.Errorf("the good document was reported: %s", ee.msg)
	}
	_ = out
	if _, err := runLegion(t, "", "validate"); err == nil || !strings.Contains(err.Error(), "-f") {
		t.Errorf("validate without -f: %v", err)
	}
	if _, err := runLegion(t, "", "validate", "-f", "../../examples", "-o", "toml"); err == nil {
		t.Error("validate -o toml succeeded")
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	out, err := runLegion(t, "", "version", "--client")
	if err != nil || !strings.HasPrefix(out, "legion "+version) {
		t.Fatalf("version: %q %v", out, err)
	}
}

func TestNodeResolverNeedsItsFlags(t *testing.T) {
	t.Parallel()
	if _, err := runLegion(t, "", "node-resolver"); err == nil || !strings.Contains(err.Error(), "--listen and --zone are required") {
		t.Fatalf("node-resolver without flags: %v", err)
	}
	if _, err := runLegion(t, "", "node-resolver", "--listen", "127.0.0.1:0", "--zone", t.TempDir()+"/none.json", "--upstream", "127.0.0.1:1"); err == nil {
		t.Fatal("node-resolver started without a zone file")
	}
}

// validate takes its manifests as apply and delete do: -f/--filename.
func TestValidateTakesFilenameAsApplyDoes(t *testing.T) {
	t.Parallel()
	for _, flag := range []string{"-f", "--filename", "--file"} {
		out, err := runLegion(t, "", "validate", flag, "../../examples/jobs.yaml")
		if err != nil || !strings.Contains(out, "kind: Job") {
			t.Errorf("validate %s: %v\n%s", flag, err, out)
		}
	}
}

// Wrong arguments are refused with the command's usage line.
func TestWrongArgumentsSayTheUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"volume", "move", "data", "n1", "n2"}, "volume move: accepts between 1 and 2 arg(s), received 3; usage: legion volume move VOLUME NODE"},
		{[]string{"get"}, "get: requires at least 1 arg(s), only received 0; usage: legion get KIND [NAME...] | get KIND/NAME..."},
		{[]string{"rollout", "restart"}, "rollout restart: accepts between 1 and 2 arg(s), received 0; usage: legion rollout restart SERVICE"},
	} {
		if _, err := runLegion(t, "", tc.args...); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("legion %v: %v, want it to say %q", tc.args, err, tc.says)
		}
	}
}

// A word that names no subcommand of a group (node, stack, image, ...)
// fails, naming the choices; the group alone still prints its help.
func TestUnknownSubcommandsAreRefused(t *testing.T) {
	t.Parallel()
	out, err := runLegion(t, "", "node", "remove-all", "n1")
	if err == nil || !strings.Contains(err.Error(), `legion node: unknown command "remove-all": expected one of activate, demote, drain`) {
		t.Errorf("legion node remove-all: %v\n%s", err, out)
	}
	if _, err := runLegion(t, "", "stack", "bogus"); err == nil {
		t.Error("legion stack bogus succeeded")
	}
	out, err = runLegion(t, "", "node")
	if err != nil || !strings.Contains(out, "Available Commands:") {
		t.Errorf("legion node alone: %v\n%s", err, out)
	}
}

// A flag that does nothing in the form given is refused before anything
// is asked of the cluster, not accepted and dropped.
func TestFlagsThatWouldBeIgnoredAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"volume", "move", "data", "--node", "n1", "--timeout", "5m"}, "volume move: --timeout applies only with --wait"},
		{[]string{"volume", "move", "data", "--node", "n1", "--wait", "--timeout", "0s"}, "volume move: --timeout 0s: expected a positive duration"},
		{[]string{"get", "svc", "web", "-A"}, "get svc web -A: an object is read by name in one namespace (-n), not across all"},
		{[]string{"get", "svc", "web", "-l", "app=web"}, "get svc web -l: a name and a label selector do not go together"},
		{[]string{"apply", "-f", "-", "--timeout", "5s"}, "--timeout applies only with --wait"},
		{[]string{"node", "drain", "n1", "--timeout", "5s"}, "node drain: --timeout and -o apply only with --wait"},
	} {
		args := append(tc.args, "--server", "127.0.0.1:1", "--config", "none")
		if _, err := runLegion(t, "", args...); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("legion %v: %v, want it to say %q", tc.args, err, tc.says)
		}
	}
}

// kubectl's flags beside -f: what Legion does anyway (-R, --validate,
// apply's --server-side) is taken, the rest refused saying why, before
// any manager is asked.
func TestKubectlManifestFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "c.yaml"), []byte("apiVersion: legion/v1\nkind: Config\nmetadata: {name: c}\nspec: {text: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runLegion(t, "", "validate", "-R", "--validate=strict", "-f", dir); err != nil || !strings.Contains(out, "name: c") {
		t.Errorf("validate -R --validate=strict: %v\n%s", err, out)
	}
	unreachable := []string{"--server", "127.0.0.1:1", "--request-timeout", "100ms"}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"validate", "-k", dir}, "kustomize is not built in: run kustomize build " + dir + " | legion validate -f -"},
		{[]string{"apply", "-k", "overlays/prod"}, "kustomize build overlays/prod | legion apply -f -"},
		{[]string{"delete", "--kustomize", "base"}, "kustomize build base | legion delete -f -"},
		{[]string{"apply", "-f", dir, "--validate=false"}, "the cluster checks every object it is given"},
		{[]string{"apply", "-f", dir, "--record"}, "every change is recorded already: legion audit"},
		{[]string{"apply", "-f", dir, "--server-side=false"}, "an apply here is always server-side"},
	} {
		if _, err := runLegion(t, "", append(tc.args, unreachable...)...); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("legion %q: %v, want it to say %q", tc.args, err, tc.says)
		}
	}
	// Taken, --server-side goes on to the apply (here to a manager that
	// is not there).
	if _, err := runLegion(t, "", append([]string{"apply", "--server-side", "-f", dir}, unreachable...)...); err == nil || strings.Contains(err.Error(), "server-side") {
		t.Errorf("apply --server-side: %v, want it taken and the manager's absence said", err)
	}
}
