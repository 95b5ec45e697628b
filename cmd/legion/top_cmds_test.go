package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/internal/golden"
)

// topFixture is legion top's known cluster (internal/topui/testdata):
// fixed objects and the usage their nodes reported.
func topFixture(t *testing.T) usageData {
	t.Helper()
	data, err := os.ReadFile("../../internal/topui/testdata/cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	docs, err := legion.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var objs []legion.Object
	for _, d := range docs {
		if len(d.Errs) > 0 {
			t.Fatalf("document %d: %v", d.Index, d.Errs)
		}
		objs = append(objs, d.Object)
	}
	raw, err := os.ReadFile("../../internal/topui/testdata/usage.json")
	if err != nil {
		t.Fatal(err)
	}
	var u struct{ Usage []legion.Usage }
	if err := json.Unmarshal(raw, &u); err != nil {
		t.Fatal(err)
	}
	return usageData{nodes: typed[*legion.Node](objs), tasks: typed[*legion.Task](objs), services: typed[*legion.Service](objs), usage: u.Usage}
}

// legion top nodes|tasks|services on the known cluster, in the table,
// wide and JSON forms.
func TestTopListingsGolden(t *testing.T) {
	t.Parallel()
	d := topFixture(t)
	for name, view := range map[string]func(usageData, string) listing{"nodes": nodesTopListing, "tasks": tasksTopListing, "services": servicesTopListing} {
		for _, o := range []string{"table", "wide", "json"} {
			f, err := parseOutput(o)
			if err != nil {
				t.Fatal(err)
			}
			var out, errw bytes.Buffer
			l := view(d, "")
			if err := l.print(&out, &errw, f); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "top_"+name+"_"+o+".golden"), out.String())
		}
		// kubectl top's --sort-by: the most used first, unreported last;
		// --no-headers drops the header.
		for _, by := range []string{"cpu", "memory"} {
			f, _ := parseOutput("table")
			f.noHeaders = true
			var out, errw bytes.Buffer
			l := view(d, by)
			if err := l.print(&out, &errw, f); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "top_"+name+"_by_"+by+".golden"), out.String())
		}
	}
}

// byUse orders by the use asked, the most first, rows with no report
// last whatever their figures.
func TestByUse(t *testing.T) {
	t.Parallel()
	type row struct {
		name     string
		reported bool
		cpu      legion.CPU
		mem      legion.Bytes
	}
	rows := []row{{"a", true, 100, 300}, {"b", true, 300, 100}, {"c", false, 900, 900}, {"d", true, 200, 200}}
	for by, want := range map[string]string{"cpu": "b d a c", "memory": "a d b c", "": "a b c d"} {
		got := slices.Clone(rows)
		byUse(got, by, func(r row) (bool, legion.CPU, legion.Bytes) { return r.reported, r.cpu, r.mem })
		var names []string
		for _, r := range got {
			names = append(names, r.name)
		}
		if strings.Join(names, " ") != want {
			t.Errorf("byUse %q: %v, want %s", by, names, want)
		}
	}
}

// kubectl top pod --containers is refused saying why, before any call:
// usage is measured per pod.
func TestTopContainersSaysUsageIsPerPod(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"top", "pod", "--containers"}, {"top", "tasks", "--containers=true"}} {
		_, err := runLegion(t, "", args...) // refused while the flags are read
		if err == nil || !strings.Contains(err.Error(), "a task's use is measured for its pod as a whole") {
			t.Errorf("legion %s: %v", strings.Join(args, " "), err)
		}
	}
}
