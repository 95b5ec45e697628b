package scheduler_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	return strings.Fields(string(out))
}

// TestImports holds the planner to the standard library (no I/O), the
// object model and the cron parser.
func TestImports(t *testing.T) {
	const self = "github.com/legionbsd/legion/scheduler"
	allowed := []string{"github.com/legionbsd/legion", "github.com/robfig/cron/v3"}
	banned := []string{"os", "os/exec", "net", "net/http", "io/fs", "syscall", "math/rand", "math/rand/v2", "log", "log/slog"}
	for _, imp := range goList(t, "-f", `{{join .Imports " "}}`, self) {
		if slices.Contains(banned, imp) {
			t.Errorf("scheduler imports %s: it must do no I/O and read no clock or randomness", imp)
			continue
		}
		if strings.Contains(strings.Split(imp, "/")[0], ".") && !slices.Contains(allowed, imp) {
			t.Errorf("scheduler imports %s: only the standard library, legion and robfig/cron are allowed", imp)
		}
	}
	// Every non-standard package it pulls in comes through legion or cron.
	viaLegion := goList(t, "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, "github.com/legionbsd/legion")
	for _, dep := range goList(t, "-deps", "-f", `{{if not .Standard}}{{.ImportPath}}{{end}}`, self) {
		if dep != self && !slices.Contains(allowed, dep) && !slices.Contains(viaLegion, dep) {
			t.Errorf("scheduler depends on %s", dep)
		}
	}
}
