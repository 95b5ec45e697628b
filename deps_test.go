package legion

import (
	"os/exec"
	"strings"
	"testing"
)

// The object model stays free of I/O: it imports the standard library,
// its YAML codec, the cron parser and go-containerregistry's reference
// parser (with the digest type it uses), so admission reads image
// references as nodes pull them; nothing else of this module.
func TestImportsStayPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := []string{"github.com/legionbsd/legion", "go.yaml.in/yaml/v3", "github.com/robfig/cron/v3",
		"github.com/google/go-containerregistry/pkg/name", "github.com/opencontainers/go-digest"}
	for _, dep := range strings.Fields(string(out)) {
		ok := false
		for _, a := range allowed {
			if dep == a {
				ok = true
			}
		}
		if !ok {
			t.Errorf("package legion depends on %s", dep)
		}
	}
	std, err := exec.Command("go", "list", "-deps", "-f", "{{if .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, dep := range strings.Fields(string(std)) {
		switch dep {
		case "net/http", "os/exec", "database/sql":
			t.Errorf("package legion depends on %s, an I/O package", dep)
		}
	}
}
