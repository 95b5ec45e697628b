package packaging

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// makeVars reads a port Makefile's plain assignments (NAME=<tab>value).
func makeVars(t *testing.T, path string) (map[string]string, []string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	var lines []string
	assign := regexp.MustCompile(`^([A-Z_]+)=(\s*)(.*)$`)
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if m := assign.FindStringSubmatch(line); m != nil {
			if m[2] == "" || strings.Contains(m[2], " ") {
				t.Errorf("%s: %q: the ports tree separates a value from its = with tabs", path, line)
			}
			vars[m[1]] = m[3]
		}
	}
	return vars, lines
}

// TestPortSkeleton checks the sysutils/legion port the way portlint
// would (Debian has no portlint): the variables a port must set and their
// form, that what it names exists in this tree (the module, the main
// package, the rc script, the licence and the version variable it
// stamps), and pkg-descr and pkg-plist.
func TestPortSkeleton(t *testing.T) {
	t.Parallel()
	vars, lines := makeVars(t, filepath.Join(portDir, "Makefile"))
	for _, v := range []string{"PORTNAME", "DISTVERSION", "CATEGORIES", "MAINTAINER", "COMMENT", "WWW", "LICENSE",
		"LICENSE_FILE", "USES", "GO_MODULE", "GO_TARGET", "USE_RC_SUBR"} {
		if vars[v] == "" {
			t.Errorf("Makefile: %s is not set", v)
		}
	}
	if vars["PORTNAME"] != filepath.Base(portDir) {
		t.Errorf("PORTNAME %q, want the port's directory %q", vars["PORTNAME"], filepath.Base(portDir))
	}
	if c := strings.Fields(vars["CATEGORIES"]); len(c) == 0 || c[0] != filepath.Base(filepath.Dir(portDir)) {
		t.Errorf("CATEGORIES %q: the first must be the port's category directory", vars["CATEGORIES"])
	}
	if !strings.Contains(vars["MAINTAINER"], "@") {
		t.Errorf("MAINTAINER %q is not an address", vars["MAINTAINER"])
	}
	comment := vars["COMMENT"]
	if len(comment) > 70 || strings.HasSuffix(comment, ".") || !unicode.IsUpper([]rune(comment)[0]) ||
		strings.HasPrefix(comment, "A ") || strings.HasPrefix(comment, "An ") {
		t.Errorf("COMMENT %q: at most 70 characters, capitalised, no leading article, no full stop", comment)
	}
	if !strings.HasPrefix(vars["USES"], "go:") || !strings.Contains(vars["USES"], "modules") {
		t.Errorf("USES %q: a Go port built from its modules", vars["USES"])
	}
	if lines[len(lines)-1] != ".include <bsd.port.mk>" {
		t.Errorf("the Makefile must end with .include <bsd.port.mk>, ends with %q", lines[len(lines)-1])
	}

	// What it names must exist here.
	gomod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(gomod), "module "+vars["GO_MODULE"]+"\n") {
		t.Errorf("GO_MODULE %q is not the module go.mod names", vars["GO_MODULE"])
	}
	if f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", vars["GO_TARGET"], "main.go"), nil, parser.PackageClauseOnly); err != nil || f.Name.Name != "main" {
		t.Errorf("GO_TARGET %q is not a main package: %v", vars["GO_TARGET"], err)
	}
	if _, err := os.Stat(filepath.Join(portDir, "files", vars["USE_RC_SUBR"]+".in")); err != nil {
		t.Errorf("USE_RC_SUBR %q has no files/%s.in: %v", vars["USE_RC_SUBR"], vars["USE_RC_SUBR"], err)
	}
	if lic, err := os.ReadFile("../LICENSE"); err != nil || vars["LICENSE"] != "BSD2CLAUSE" || !strings.HasPrefix(string(lic), "BSD 2-Clause") {
		t.Errorf("LICENSE %q does not name the project's licence: %v", vars["LICENSE"], err)
	}
	stamp := regexp.MustCompile(`-X ([^ ]+)\.Version=`).FindStringSubmatch(vars["GO_LDFLAGS"])
	if stamp == nil {
		t.Fatalf("GO_LDFLAGS %q does not stamp the version", vars["GO_LDFLAGS"])
	}
	pkg := strings.TrimPrefix(stamp[1], vars["GO_MODULE"]+"/")
	src, err := os.ReadFile(filepath.Join("..", pkg, "buildinfo.go"))
	if err != nil || !strings.Contains(string(src), "var Version = ") {
		t.Errorf("GO_LDFLAGS stamps %s.Version, which is not a variable there: %v", stamp[1], err)
	}

	descr, err := os.ReadFile(filepath.Join(portDir, "pkg-descr"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(descr)), "\n") {
		if len(l) > 80 {
			t.Errorf("pkg-descr: line longer than 80 characters: %q", l)
		}
	}
	plist, err := os.ReadFile(filepath.Join(portDir, "pkg-plist"))
	if err != nil {
		t.Fatal(err)
	}
	entries := strings.Fields(string(plist))
	for _, e := range entries {
		if strings.HasPrefix(e, "/") {
			t.Errorf("pkg-plist: %q must be relative to PREFIX", e)
		}
	}
	if len(entries) == 0 || entries[0] != "bin/legion" {
		t.Errorf("pkg-plist %q: want bin/legion", entries)
	}
}
