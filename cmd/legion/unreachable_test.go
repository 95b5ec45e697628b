package main

import (
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/internal/testcluster"
)

// A command against an address where no manager runs says so after the
// client's DialRetry (2 s), naming the address and what to do, rather than
// wait out the election retry and print gRPC's transport error.
func TestCommandAgainstADownManagerFailsFast(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{})
	down := testcluster.FreeAddr(t)
	start := time.Now()
	out, err := runLegion(t, "", "get", "services", "--server", down, "--credentials", c.AdminFile())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no manager answers at "+down) || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("legion get against %s: %v\n%s", down, err, out)
	}
	if took >= client.DefaultRetry/2 {
		t.Fatalf("it took %s to say no manager answers: the election retry was waited out", took)
	}
}
