package main

import (
	"strings"
	"testing"

	"github.com/legionbsd/legion/client"
)

// TestPrintRotation: a rotation under way names the nodes not yet
// renewed, and with none says what is left rather than "0 node(s): ".
func TestPrintRotation(t *testing.T) {
	for _, c := range []struct {
		r    client.CARotation
		want string
	}{
		{client.CARotation{Digest: "new"}, "CA:          new\nRotation:    none under way\n"},
		{client.CARotation{Digest: "new", PreviousDigest: "old", Pending: []string{"w1", "w2"}},
			"CA:          new\nPrevious CA: old (trusted until every node renewed)\nPending:     2 node(s): w1, w2\n"},
		{client.CARotation{Digest: "new", PreviousDigest: "old"},
			"CA:          new\nPrevious CA: old (trusted until every node renewed)\nPending:     none: every node renewed, and the rotation ends within seconds (a check of the leader's)\n"},
	} {
		var b strings.Builder
		printRotation(&b, c.r)
		if b.String() != c.want {
			t.Errorf("printRotation(%+v):\n%s\nwant\n%s", c.r, b.String(), c.want)
		}
	}
}
