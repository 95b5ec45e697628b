package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// legion gen-man writes one page per command an operator can run (and
// none for the hidden ones), each a section 1 page saying its synopsis,
// dated SOURCE_DATE_EPOCH when set, as the port builds them.
func TestGenManWritesAPageForEveryCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1780000000") // May 2026
	var out, errOut bytes.Buffer
	if err := rootWith(&out, &errOut, "gen-man", dir).Execute(); err != nil {
		t.Fatalf("gen-man: %v\n%s", err, errOut.String())
	}
	want := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if !c.IsAvailableCommand() && c.HasParent() {
			return
		}
		want[strings.ReplaceAll(c.CommandPath(), " ", "-")+".1"] = true
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := newRootCommand()
	root.InitDefaultCompletionCmd() // as Execute adds it
	walk(root)
	if len(want) < 40 {
		t.Fatalf("only %d commands found: the walk is wrong", len(want))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, e := range entries {
		got[e.Name()] = true
	}
	for name := range want {
		if !got[name] {
			t.Errorf("no man page %s", name)
		}
	}
	for name := range got {
		if !want[name] {
			t.Errorf("man page %s for no command an operator can run", name)
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "legion-node-drain.1"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`.TH "LEGION" "1" "May 2026"`, "legion node drain", ".SH SYNOPSIS", "--wait"} {
		if !bytes.Contains(page, []byte(s)) {
			t.Errorf("legion-node-drain.1 lacks %q:\n%s", s, page)
		}
	}
	if got["legion-gen-man.1"] || got["legion-node-resolver.1"] {
		t.Error("hidden commands got man pages")
	}
}
