package main

import (
	"bytes"
	"context"
	"regexp"
	"testing"

	"github.com/legionbsd/legion/internal/leakcheck"
	"github.com/legionbsd/legion/internal/testcluster"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// The example runs against a real manager on loopback.
func TestExampleAgainstAManager(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	ctx := context.Background()
	var out bytes.Buffer
	if err := run(ctx, c.Managers[0].Addr, c.AdminFile(), &out); err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(`^config/greeting created at version \d+
value: hello from the Go client
1 config\(s\) labelled example=client at version \d+
config/greeting deleted
$`)
	if !want.MatchString(out.String()) {
		t.Fatalf("output:\n%s", out.String())
	}
}
