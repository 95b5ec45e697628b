package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/cluster/store"
)

// editorScript writes an editor for legion edit: it copies the file it is
// given to seen, waits for the file go when go is set (so the test can
// write the object meanwhile; the wait is bounded), then runs sed with
// expr on it.
func editorScript(t *testing.T, seen, wait, expr string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "editor.sh")
	script := "#!/bin/sh\ncp \"$1\" '" + seen + "'\n"
	if wait != "" {
		script += "n=0; while [ ! -e '" + wait + "' ] && [ $n -lt 400 ]; do sleep 0.05; n=$((n+1)); done\n"
	}
	script += "sed -i -e '" + expr + "' \"$1\"\n"
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// legion edit applies what the editor saves: the labels and spec, not a
// rename; nothing when the file is saved as it was; over a write of the
// status alone, not over one of the spec.
func TestEdit(t *testing.T) {
	// Where edit keeps an edit it could not apply: the test's own.
	t.Setenv("TMPDIR", t.TempDir())
	s, dir := startDaemon(t)
	flags := []string{"--server", s.Addr(), "--credentials", filepath.Join(dir, server.AdminFile)}
	if out, err := runLegion(t, "", "init", "--server", s.Addr()); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	cli := func(args ...string) (string, error) { return runLegion(t, "", append(args, flags...)...) }
	manifest := "apiVersion: legion/v1\nkind: Config\nmetadata: {name: site, labels: {app: web}}\nspec: {text: hello}\n" +
		"---\napiVersion: legion/v1\nkind: Service\nmetadata: {name: web}\nspec:\n  replicas: 1\n  pod: {containers: [{name: c, image: localhost/app:1}]}\n"
	if out, err := runLegion(t, manifest, append([]string{"apply", "-f", "-"}, flags...)...); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	work := t.TempDir()
	seen := filepath.Join(work, "seen.yaml")
	ctx := context.Background()
	st := s.Store()

	t.Setenv("LEGION_EDITOR", editorScript(t, seen, "", "s/text: hello/text: goodbye/"))
	out, err := cli("edit", "config", "site")
	if err != nil || !strings.Contains(out, "config/site edited") {
		shown, _ := os.ReadFile(seen)
		t.Fatalf("edit: %v\n%s\nshown:\n%s", err, out, shown)
	}
	shown, _ := os.ReadFile(seen)
	for _, want := range []string{"# Edit config/site", "kind: Config", "name: site", "app: web", "text: hello"} {
		if !strings.Contains(string(shown), want) {
			t.Errorf("the editor was shown no %q:\n%s", want, shown)
		}
	}
	if strings.Contains(string(shown), "uid:") || strings.Contains(string(shown), "version:") {
		t.Errorf("the editor was shown the object's server fields:\n%s", shown)
	}
	got, _, err := st.Get(legion.KindConfig, legion.DefaultNamespace, "site")
	if err != nil || string(got.(*legion.Config).Spec.Data) != "goodbye" || got.GetMetadata().Labels["app"] != "web" {
		t.Fatalf("after the edit: %+v, %v", got, err)
	}

	// Saved as it was: nothing applied. The editor is kubectl's
	// KUBE_EDITOR, where LEGION_EDITOR is not set.
	t.Setenv("LEGION_EDITOR", "")
	t.Setenv("VISUAL", "false")
	t.Setenv("KUBE_EDITOR", editorScript(t, seen, "", "s/nothing-here//"))
	if out, err := cli("edit", "config/site"); err != nil || !strings.Contains(out, "config/site unchanged: the edit was cancelled") {
		t.Errorf("an edit saved unchanged, in KUBE_EDITOR: %v\n%s", err, out)
	}

	// A save the cluster refuses opens the file again with the refusal on
	// top, as kubectl does; fixed there, it is applied.
	twice := filepath.Join(t.TempDir(), "editor.sh")
	script := "#!/bin/sh\ncount='" + filepath.Join(work, "count") + "'\n" +
		"n=$(cat \"$count\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$count\"\n" +
		"cp \"$1\" '" + work + "'/seen-$n.yaml\n" +
		"if [ $n = 1 ]; then sed -i 's/text: goodbye/txet: goodbye/' \"$1\"; else sed -i 's/txet: goodbye/text: again/' \"$1\"; fi\n"
	if err := os.WriteFile(twice, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LEGION_EDITOR", twice)
	if out, err := cli("edit", "config", "site"); err != nil || !strings.Contains(out, "config/site edited") {
		t.Fatalf("an edit fixed after a refusal: %v\n%s", err, out)
	}
	second, _ := os.ReadFile(filepath.Join(work, "seen-2.yaml"))
	if !strings.Contains(string(second), "# The cluster refused the last save") || !strings.Contains(string(second), "spec.txet: unknown field") ||
		strings.Count(string(second), "# Edit config/site") != 1 {
		t.Errorf("the file opened again after a refusal:\n%s", second)
	}
	if got, _, _ := st.Get(legion.KindConfig, legion.DefaultNamespace, "site"); string(got.(*legion.Config).Spec.Data) != "again" {
		t.Errorf("after the fixed edit: %q", got.(*legion.Config).Spec.Data)
	}

	// A rename is refused; saved again as refused, the edit is given up
	// and kept for the user.
	t.Setenv("LEGION_EDITOR", editorScript(t, seen, "", "s/name: site/name: other/"))
	out, err = cli("edit", "config", "site")
	if err == nil || !strings.Contains(err.Error(), "the edit of config/site: it names config/other: edit changes an object, it does not rename or move one") {
		t.Fatalf("a rename: %v\n%s", err, out)
	}
	kept := err.Error()[strings.Index(err.Error(), "your edit is kept in ")+len("your edit is kept in "):]
	kept, _, _ = strings.Cut(kept, ":")
	if data, rerr := os.ReadFile(kept); rerr != nil || !strings.Contains(string(data), "name: other") {
		t.Errorf("the refused edit was not kept at %q: %v", kept, rerr)
	}
	if _, _, err := st.Get(legion.KindConfig, legion.DefaultNamespace, "other"); err == nil {
		t.Errorf("a refused rename made config/other")
	}

	// A status written while the editor is open is no conflict; a spec
	// change is, and nothing is applied over it.
	goFile := filepath.Join(work, "go")
	editWhile := func(expr string, meanwhile func()) (string, error) {
		t.Helper()
		os.Remove(goFile)
		os.Remove(seen)
		t.Setenv("LEGION_EDITOR", editorScript(t, seen, goFile, expr))
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() { o, e := cli("edit", "service", "web"); done <- result{o, e} }()
		waitFor(t, "the editor open", func() bool { _, err := os.Stat(seen); return err == nil })
		meanwhile()
		if err := os.WriteFile(goFile, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		r := <-done
		return r.out, r.err
	}
	service := func() *legion.Service {
		t.Helper()
		o, _, err := st.Get(legion.KindService, legion.DefaultNamespace, "web")
		if err != nil {
			t.Fatal(err)
		}
		return o.(*legion.Service)
	}
	out, err = editWhile("s/replicas: 1/replicas: 3/", func() {
		svc := service()
		svc.Status.Message = "written while the editor is open"
		if _, err := st.PutStatus(ctx, svc, store.Precondition{}); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil || !strings.Contains(out, "service/web edited") || *service().Spec.Replicas != 3 {
		t.Fatalf("an edit over a status write: %v\n%s", err, out)
	}
	out, err = editWhile("s/replicas: 3/replicas: 4/", func() {
		svc := service()
		five := 5
		svc.Spec.Replicas = &five
		if _, _, err := st.Put(ctx, svc, store.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil || !strings.Contains(err.Error(), "service/web: its labels or spec changed while it was being edited") {
		t.Fatalf("an edit over a spec change: %v\n%s", err, out)
	}
	if r := *service().Spec.Replicas; r != 5 {
		t.Errorf("the spec written meanwhile was overwritten: replicas %d", r)
	}
}
