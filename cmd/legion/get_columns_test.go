package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// get's kubectl flags for a listing: --sort-by orders by a field (missing
// first, numbers by value, then text), -L adds a column per label key,
// --no-headers drops the header line; a watch takes all but --sort-by.
func TestGetListFlags(t *testing.T) {
	t.Parallel()
	_, flags, run := initDaemonFlags(t)
	var manifest []string
	for name, rank := range map[string]string{"a": "10", "b": "9", "c": "x", "d": "", "e": "2.5"} {
		if rank != "" {
			rank = ", rank: \"" + rank + "\""
		}
		manifest = append(manifest, "apiVersion: legion/v1\nkind: Config\nmetadata: {name: "+name+", labels: {app: shop, tier: t-"+name+rank+"}}\nspec: {text: v}\n")
	}
	if out, err := run(strings.Join(manifest, "---\n"), "apply", "-f", "-"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := run("", "get", "configs", "--sort-by", ".metadata.labels.rank", "-o", "name"); err != nil || out != "config/d\nconfig/e\nconfig/b\nconfig/a\nconfig/c\n" {
		t.Errorf("--sort-by .metadata.labels.rank: %v %q", err, out)
	}
	if out, err := run("", "get", "cfg/c", "cfg/a", "--sort-by", "{.metadata.name}", "-o", "name"); err != nil || out != "config/a\nconfig/c\n" {
		t.Errorf("get of named objects --sort-by: %v %q", err, out)
	}
	out, err := run("", "get", "configs", "-l", "tier in (t-a,t-b)", "-L", "tier,app", "--no-headers")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	tail := func(line string) string { f := strings.Fields(line); return strings.Join(f[len(f)-2:], " ") }
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], "a ") || tail(lines[0]) != "t-a shop" || tail(lines[1]) != "t-b shop" {
		t.Errorf("-L tier,app --no-headers: %v\n%s", err, out)
	}
	if out, err := run("", "get", "configs", "-L", "tier", "--sort-by", ".metadata.name"); err != nil || !strings.Contains(strings.SplitN(out, "\n", 2)[0], "TIER") {
		t.Errorf("-L tier heads a TIER column: %v\n%s", err, out)
	}
	if out, err := run("", "get", "configs", "-o", "custom-columns=N:.metadata.name", "--no-headers", "--sort-by", ".metadata.name"); err != nil || out != "a\nb\nc\nd\ne\n" {
		t.Errorf("custom columns --no-headers: %v %q", err, out)
	}
	// --show-kind names each object as kind/name, as kubectl's.
	if out, err := run("", "get", "configs", "--show-kind", "--no-headers", "--sort-by", ".metadata.name"); err != nil || !strings.HasPrefix(out, "config/a ") || !strings.Contains(out, "\nconfig/e ") {
		t.Errorf("--show-kind: %v\n%s", err, out)
	}
	// A watch takes -L, --show-labels and --no-headers as kubectl get -w
	// does: its rows without the header, with the label columns.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watched := &syncBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- rootWith(watched, watched, append([]string{"get", "configs", "-w", "-l", "tier=t-a", "-L", "tier", "--show-labels", "--no-headers"},
			flags...)...).ExecuteContext(ctx)
	}()
	waitFor(t, "the watch's first row", func() bool { return strings.Contains(watched.String(), "\n") })
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("get -w -L --show-labels --no-headers: %v", err)
	}
	row := strings.Fields(strings.TrimSpace(watched.String()))
	if len(row) < 4 || row[0] != "ADDED" || row[1] != "a" || !slices.Contains(row, "t-a") || !slices.Contains(row, "app=shop,rank=10,tier=t-a") {
		t.Errorf("get -w -L tier --show-labels --no-headers printed:\n%s", watched.String())
	}
	// --watch-only: the changes alone, without the listing first. The
	// test changes config a until the watch, started meanwhile, says so.
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	changes := &syncBuffer{}
	go func() {
		done <- rootWith(changes, changes, append([]string{"get", "configs", "--watch-only"}, flags...)...).ExecuteContext(ctx)
	}()
	n := 0
	waitFor(t, "--watch-only to print a change", func() bool {
		n++
		if out, err := run("", "label", "config/a", fmt.Sprintf("n=%d", n), "--overwrite"); err != nil {
			t.Fatalf("label: %v\n%s", err, out)
		}
		return strings.Contains(changes.String(), "MODIFIED")
	})
	cancel()
	<-done
	if got := changes.String(); strings.Contains(got, "ADDED") || !strings.HasPrefix(got, "EVENT") {
		t.Errorf("get --watch-only printed the listing, or no header:\n%s", got)
	}
	for args, says := range map[string]string{
		"get configs -w --sort-by .metadata.name": "-w prints each change as it comes: --sort-by orders a listing",
		"get configs --sort-by {.x[}":             "--sort-by {.x[}: unterminated array",
	} {
		if _, err := run("", strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("legion %s: %v, want it to say %q", args, err, says)
		}
	}
}
