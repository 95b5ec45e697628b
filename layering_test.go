package legion_test

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/legionbsd/legion"

// layer is what the packages matching pattern may import. A pattern is a
// package path relative to the module ("" is the root, legion), or one
// ending in "/..." for a package and everything below it; the longest
// pattern that matches a package holds it.
type layer struct {
	pattern string
	// may lists the module's packages (patterns, as above) a package of
	// the layer may import directly.
	may []string
	// thirdParty, when not nil, lists the only modules outside the
	// standard library and this module it may import directly.
	thirdParty []string
	// noStd lists standard packages it may not import directly: the ones
	// that do I/O, for packages that must stay pure.
	noStd []string
	// neverDeps lists package path prefixes that may not appear anywhere
	// in its dependencies: what would make an embedder pull in a server.
	neverDeps []string
}

var (
	pureStd = []string{"os", "os/exec", "net", "net/http", "io/fs", "io/ioutil", "syscall", "database/sql"}
	// A program embedding the runtime, the images or the client must not
	// get Raft, a gRPC server of the managers' or the CLI with them.
	noServer = []string{"github.com/hashicorp/raft", "github.com/spf13/cobra", "go.etcd.io/bbolt",
		module + "/cluster/server", module + "/cluster/store", module + "/internal/agent", module + "/internal/daemon"}
	nodeSide  = []string{module + "/internal/agent", module + "/internal/daemon", module + "/jail"}
	harnesses = []string{"cluster/dispatcher/dispatchertest", "cluster/sessions/sessionstest", "cluster/store/storetest", "scheduler/schedtest",
		"jail/jailtest", "internal/testcluster", "internal/testimage/...", "image/internal/regtest", "internal/leakcheck",
		"internal/testpoll", "internal/testaddr", "internal/logtest", "internal/scale", "internal/lab/...", "internal/golden", "internal/regmodel",
		"internal/grpcpings"}
)

// layers is the map of the module: one row a layer, read top to bottom
// from the object model to the binary. A package no row matches fails the
// test, so a new package gets a row on purpose.
var layers = []layer{
	// JSON decoded as encoding/json does, faster: below the object model.
	{pattern: "internal/jsonfast", thirdParty: []string{"github.com/go-json-experiment/json"}, noStd: pureStd},
	// The object model and admission: no I/O, few dependencies.
	{pattern: "", may: []string{"internal/jsonfast"}, thirdParty: []string{"go.yaml.in/yaml/v3", "github.com/robfig/cron/v3",
		"github.com/google/go-containerregistry/pkg/name", "github.com/opencontainers/go-digest"},
		noStd: pureStd, neverDeps: []string{"net/http", "os/exec"}},
	// The planner is a pure function: no I/O, no clock, no randomness.
	{pattern: "scheduler", may: []string{""}, thirdParty: []string{"github.com/robfig/cron/v3"},
		noStd: append([]string{"math/rand", "math/rand/v2", "log", "log/slog"}, pureStd...)},
	// compose-go reads files an extends names only from local paths, so
	// the converter copies them (read through Options.ReadFile) into a
	// temporary directory: os, for that alone.
	{pattern: "compose", may: []string{""}, noStd: []string{"os/exec", "net", "net/http", "io/fs", "io/ioutil", "syscall", "database/sql"}},

	// Node-side building blocks, each usable alone.
	{pattern: "sys"},
	// Linux's /proc/<pid>/stat read in one place, for the process
	// platform, tests and benchmarks: the standard library alone.
	{pattern: "internal/procstat", thirdParty: []string{}},
	{pattern: "jail/...", may: []string{"jail/...", "sys", "internal/procstat"}, neverDeps: noServer},
	{pattern: "zfs", may: []string{"sys"}, neverDeps: noServer},
	{pattern: "image/...", may: []string{"image/...", "zfs", "sys"}, neverDeps: noServer},
	// netbsd renders what the agent translates from the object model; it
	// does not read the object model itself.
	{pattern: "netbsd", may: []string{"sys", "netbsd/addrplan"}, neverDeps: noServer},
	// The address plan is shared by managers and nodes, so it does no I/O.
	{pattern: "netbsd/addrplan", thirdParty: []string{}, noStd: pureStd},
	// PROXY protocol on both sides through go-proxyproto, not by hand;
	// httpguts is the request checks net/http's server makes, which its
	// lanes must make alike.
	{pattern: "netbsd/ingress", thirdParty: []string{"github.com/pires/go-proxyproto", "golang.org/x/net/http/httpguts"}, neverDeps: noServer},
	{pattern: "netbsd/loopback", may: []string{"netbsd/addrplan"}, neverDeps: noServer},
	{pattern: "netbsd/resolver", neverDeps: noServer},

	// The wire and the client.
	{pattern: "internal/proto", may: []string{""}},
	{pattern: "internal/endpoints", may: []string{"", "internal/jsonfast"}},
	{pattern: "client", may: []string{"", "cluster/pki", "internal/proto"}, neverDeps: noServer},

	// The manager.
	{pattern: "cluster/pki"},
	{pattern: "cluster/rbac", may: []string{""}},
	{pattern: "cluster/store", may: []string{"", "internal/jsonfast"}},
	// The cluster's address plan in the store.
	{pattern: "cluster/netplan", may: []string{"", "cluster/store", "netbsd/addrplan"}},
	// Audit events, their buffer and batches: over the store, no network.
	{pattern: "cluster/audit", may: []string{"", "cluster/store"}},
	// Events derived from changes, and their ring: pure, fed by the server.
	{pattern: "cluster/events", may: []string{""}, neverDeps: nodeSide},
	// ACME for Routes: the store and an authority, nothing of the node side.
	{pattern: "cluster/acme", may: []string{"", "cluster/store"}, neverDeps: nodeSide},
	{pattern: "cluster/...", may: []string{"", "scheduler", "cluster/...", "internal/proto", "internal/endpoints", "internal/jsonfast",
		"netbsd/addrplan", "image", "image/cosign", "internal/buildinfo"}},
	// The leader's work and the manager's entry point run on managers
	// without an agent: nothing of the node side comes with them.
	{pattern: "cluster/leader", may: []string{"", "scheduler", "cluster/acme", "cluster/controller", "cluster/netplan", "cluster/store", "internal/proto", "netbsd/addrplan", "image", "image/cosign"},
		neverDeps: nodeSide},
	// Metrics read the store; a scrape reaches nothing else.
	{pattern: "cluster/metrics", may: []string{"", "cluster/store"}, neverDeps: nodeSide},
	{pattern: "cluster/manager", may: []string{"cluster/audit", "cluster/controller", "cluster/leader", "cluster/metrics", "cluster/server", "image"}, neverDeps: nodeSide},

	// The node agent: it reaches the managers only through the protocol.
	{pattern: "internal/agent/...", may: []string{"", "internal/agent/...", "internal/endpoints", "internal/jsonfast", "internal/proto",
		"sys", "jail", "image", "scheduler", "zfs"}},

	// The agent's metrics read the runtime and the image store they are given.
	{pattern: "internal/agent/metrics", may: []string{"", "jail", "image"}},

	// The daemon composes everything; the binary composes the daemon.
	{pattern: "internal/daemon", may: []string{"", "...", "-cmd"}},
	{pattern: "cmd/...", may: []string{"", "...", "-cmd"}},
	// legion top's views and terminal UI: a pure model over the object
	// model; the command feeds it the cluster.
	{pattern: "internal/topui", may: []string{""}, thirdParty: []string{"github.com/charmbracelet/bubbletea",
		"github.com/charmbracelet/bubbles", "github.com/charmbracelet/lipgloss", "github.com/charmbracelet/x/ansi"},
		noStd: pureStd, neverDeps: noServer},
	// Test harnesses compose whatever they start; only tests import them.
	{pattern: "internal/testcluster", may: []string{"", "...", "-cmd"}},
	{pattern: "internal/testimage/...", may: []string{"", "...", "-cmd"}},
	{pattern: "internal/leakcheck", thirdParty: []string{"go.uber.org/goleak"}},
	// Waits for a condition, and for a call a manager answers UNAVAILABLE
	// (gRPC's codes and status for that alone).
	{pattern: "internal/testpoll", thirdParty: []string{"google.golang.org/grpc"}},
	// Loopback ports for the servers tests start; the standard library alone.
	{pattern: "internal/testaddr"},
	// Output and logs the code under test writes while the test reads;
	// the standard library alone.
	{pattern: "internal/logtest"},
	// The pings a gRPC server's clients send, counted (gRPC's credentials).
	{pattern: "internal/grpcpings", thirdParty: []string{"google.golang.org/grpc"}},
	// Golden files under testdata, rewritten with -update.
	{pattern: "internal/golden", thirdParty: []string{"github.com/google/go-cmp"}},
	// The register model linearizability tests check histories against.
	{pattern: "internal/regmodel", thirdParty: []string{"github.com/anishathalye/porcupine"}, noStd: pureStd},
	// Many simulated agents against real managers, for scale runs.
	{pattern: "internal/scale", may: []string{"", "...", "-cmd"}},
	// Real daemons in network namespaces, and the command that runs them.
	{pattern: "internal/lab/...", may: []string{"", "...", "-cmd"}},
	// The build stamp: read by the CLI and reported by managers.
	{pattern: "internal/buildinfo", thirdParty: []string{}, noStd: pureStd},
	{pattern: "scheduler/schedtest", may: []string{"", "scheduler"}, noStd: pureStd},

	// No code: tests of the FreeBSD port, rc.d script and release script.
	{pattern: "packaging", thirdParty: []string{}},

	{pattern: "examples/...", may: []string{"", "client", "image", "jail/...", "zfs", "netbsd", "sys"}, neverDeps: []string{"github.com/hashicorp/raft", "github.com/spf13/cobra", "go.etcd.io/bbolt", module + "/cluster/server", module + "/cluster/store"}},
}

// matches says whether the module-relative path rel falls under pattern.
func matches(pattern, rel string) bool {
	switch {
	case pattern == "...":
		return true
	case strings.HasSuffix(pattern, "/..."):
		base := strings.TrimSuffix(pattern, "/...")
		return rel == base || strings.HasPrefix(rel, base+"/")
	}
	return rel == pattern
}

// layerOf is the row with the longest pattern matching rel.
func layerOf(rel string) (layer, bool) {
	best, found := layer{}, false
	for _, l := range layers {
		if matches(l.pattern, rel) && (!found || len(l.pattern) > len(best.pattern)) {
			best, found = l, true
		}
	}
	return best, found
}

// allowed says whether a package of l may import the module's package rel.
// A "-x/..." entry (or "-x") excludes what it names from the rest.
func (l layer) allowed(rel string) bool {
	ok := false
	for _, m := range l.may {
		if neg, isNeg := strings.CutPrefix(m, "-"); isNeg {
			if matches(neg, rel) || matches(neg+"/...", rel) {
				return false
			}
			continue
		}
		ok = ok || matches(m, rel)
	}
	return ok
}

type listed struct {
	ImportPath string
	Standard   bool
	Imports    []string
	Deps       []string
}

func goList(t *testing.T) []listed {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Standard,Imports,Deps", "./...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func relative(path string) (string, bool) {
	if path == module {
		return "", true
	}
	return strings.CutPrefix(path, module+"/")
}

func isStd(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".")
}

// thirdPartyAllowed: an import of a module's package or a package below it.
func thirdPartyAllowed(list []string, path string) bool {
	for _, m := range list {
		if path == m || strings.HasPrefix(path, m+"/") {
			return true
		}
	}
	return false
}

// TestLayering holds every package of the module to its row of layers:
// what it may import directly, which I/O it may not do, and what must
// never come into its dependencies.
func TestLayering(t *testing.T) {
	t.Parallel()
	pkgs := goList(t)
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: is the test run from the module?", len(pkgs))
	}
	for _, p := range pkgs {
		rel, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		l, ok := layerOf(rel)
		if !ok {
			t.Errorf("%s: no row of layers holds it; add one", p.ImportPath)
			continue
		}
		isHarness := slices.ContainsFunc(harnesses, func(h string) bool { return matches(h, rel) })
		for _, imp := range p.Imports {
			switch r, own := relative(imp); {
			case own:
				if !isHarness && slices.ContainsFunc(harnesses, func(h string) bool { return matches(h, r) }) {
					t.Errorf("%s imports the test harness %s", p.ImportPath, imp)
				} else if !isHarness && !l.allowed(r) {
					t.Errorf("%s imports %s, which its layer (%q) may not", p.ImportPath, imp, l.pattern)
				}
			case isStd(imp):
				if slices.Contains(l.noStd, imp) {
					t.Errorf("%s imports %s: it does I/O, which its layer (%q) may not", p.ImportPath, imp, l.pattern)
				}
			default:
				if l.thirdParty != nil && !thirdPartyAllowed(l.thirdParty, imp) {
					t.Errorf("%s imports %s; its layer (%q) allows only %v", p.ImportPath, imp, l.pattern, l.thirdParty)
				}
			}
		}
		for _, dep := range p.Deps {
			for _, never := range l.neverDeps {
				if dep == never || strings.HasPrefix(dep, never+"/") {
					t.Errorf("%s depends on %s, which its layer (%q) must never pull in", p.ImportPath, dep, l.pattern)
				}
			}
		}
	}
}

// The table itself: a package outside every row is caught, the longest
// row wins, and exclusions hold.
func TestLayerRules(t *testing.T) {
	t.Parallel()
	if _, ok := layerOf("brand/new"); ok {
		t.Error("a package no row names matched a row")
	}
	if l, _ := layerOf("cluster/store"); l.pattern != "cluster/store" {
		t.Errorf("cluster/store held by %q", l.pattern)
	}
	if l, _ := layerOf("cluster/controller"); l.pattern != "cluster/..." {
		t.Errorf("cluster/controller held by %q", l.pattern)
	}
	d, _ := layerOf("internal/daemon")
	if d.allowed("cmd/legion") || !d.allowed("internal/agent") || !d.allowed("") {
		t.Error("internal/daemon's row: cmd must be excluded, the rest allowed")
	}
	if c, _ := layerOf("client"); c.allowed("cluster/store") {
		t.Error("the client may import the store")
	}
}
