package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/internal/buildinfo"
	"github.com/legionbsd/legion/internal/testaddr"
	"github.com/legionbsd/legion/internal/testcluster"
	"go.yaml.in/yaml/v3"
)

// legion version prints on standard output, with the commit and the Go
// that built it.
func TestVersionOnStdout(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	root := rootWith(&out, &errOut, "version", "--client")
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if errOut.Len() > 0 || !strings.HasPrefix(out.String(), "legion "+version+" (commit ") || !strings.Contains(out.String(), runtime.Version()) {
		t.Fatalf("stdout %q, stderr %q", out.String(), errOut.String())
	}
}

// With a manager answering, legion version also prints the manager's
// build, as text and as JSON.
func TestVersionShowsServer(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 1, Leader: true})
	m := c.Managers[0]
	out, err := runLegion(t, "", "version", "--server", m.Addr, "--credentials", c.AdminFile())
	want := "Server: legion " + buildinfo.Version + " (commit " + buildinfo.Commit() + ", " + runtime.Version() + ") at " + m.Addr
	if err != nil || !strings.Contains(out, want) {
		t.Fatalf("legion version: %v\n%s\nwant a line %q", err, out, want)
	}
	out, err = runLegion(t, "", "version", "-o", "json", "--server", m.Addr, "--credentials", c.AdminFile())
	var r versionReport
	if err != nil || json.Unmarshal([]byte(out), &r) != nil {
		t.Fatalf("legion version -o json: %v\n%s", err, out)
	}
	if r.Server == nil || r.Server.Version != buildinfo.Version || r.Server.GoVersion != runtime.Version() ||
		r.Client.Commit != buildinfo.Commit() || r.ServerAddr != m.Addr || r.ServerError != "" {
		t.Fatalf("legion version -o json: %+v", r)
	}
	// kubectl version's -o yaml, the same report.
	out, err = runLegion(t, "", "version", "-o", "yaml", "--server", m.Addr, "--credentials", c.AdminFile())
	var y struct {
		Client        map[string]string `yaml:"client"`
		Server        map[string]string `yaml:"server"`
		ServerAddress string            `yaml:"serverAddress"`
	}
	if err != nil || yaml.Unmarshal([]byte(out), &y) != nil || y.Server["version"] != buildinfo.Version ||
		y.Client["goVersion"] != runtime.Version() || y.ServerAddress != m.Addr {
		t.Fatalf("legion version -o yaml: %v %+v\n%s", err, y, out)
	}
	if _, err := runLegion(t, "", "version", "-o", "wide", "--client"); err == nil || !strings.Contains(err.Error(), "version prints text, json or yaml") {
		t.Errorf("legion version -o wide: %v", err)
	}
}

// With no manager at the address, legion version says so within the
// client's dial limit, naming the address, and still succeeds.
func TestVersionServerUnreachable(t *testing.T) {
	t.Parallel()
	addr := testaddr.Loopback(t)
	start := time.Now()
	out, err := runLegion(t, "", "version", "--server", addr)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("legion version took %s with nothing at %s", took, addr)
	}
	if err != nil || !strings.Contains(out, "Server: unreachable (") || !strings.Contains(out, addr) {
		t.Fatalf("legion version: %v\n%s", err, out)
	}
}

// The top-level help lists what a user runs, not the commands the daemon
// starts itself (the node resolver).
func TestHelpHidesInternalCommands(t *testing.T) {
	t.Parallel()
	out, err := runLegion(t, "", "--help")
	if err != nil || strings.Contains(out, "node-resolver") || !strings.Contains(out, "daemon") {
		t.Fatalf("legion --help: %v\n%s", err, out)
	}
}
