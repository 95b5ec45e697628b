package sys

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExecRunsAndReportsExit(t *testing.T) {
	ctx := context.Background()
	res, err := Run(ctx, Exec{}, "sh", "-c", "echo out; echo err >&2")
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("got stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	_, err = Run(ctx, Exec{}, "sh", "-c", "echo 'No such process' >&2; exit 3")
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 3 {
		t.Fatalf("want exit 3, got %v", err)
	}
	if !IsExit(err, "No such process") {
		t.Fatalf("IsExit did not find the message in %v", err)
	}
	res, err = Exec{}.Run(ctx, Cmd{Name: "cat", Stdin: []byte("in")})
	if err != nil || string(res.Stdout) != "in" {
		t.Fatalf("stdin: %q %v", res.Stdout, err)
	}
	if _, err := Run(ctx, Exec{}, "/nonexistent/legion-test"); err == nil || IsExit(err, "") {
		t.Fatalf("a missing program must fail without an ExitError, got %v", err)
	}
}

func TestFakeRecordsAndAnswers(t *testing.T) {
	ctx := context.Background()
	f := NewFake().
		Once("zfs create", Answer{Code: 1, Stderr: "dataset already exists"}).
		On("zfs list", Answer{Stdout: "tank\n"})
	_, err := Run(ctx, f, "zfs", "create", "-p", "tank/a")
	if !IsExit(err, "already exists") {
		t.Fatalf("first create: %v", err)
	}
	if _, err := Run(ctx, f, "zfs", "create", "-p", "tank/a"); err != nil {
		t.Fatalf("a Once rule must be used up: %v", err)
	}
	res, err := Run(ctx, f, "zfs", "list", "-H")
	if err != nil || string(res.Stdout) != "tank\n" {
		t.Fatalf("list: %q %v", res.Stdout, err)
	}
	want := []string{"zfs create -p tank/a", "zfs create -p tank/a", "zfs list -H"}
	if d := cmp.Diff(want, f.Lines()); d != "" {
		t.Fatalf("lines (-want +got):\n%s", d)
	}
	f.Reset()
	if len(f.Calls()) != 0 {
		t.Fatal("reset kept calls")
	}
}
