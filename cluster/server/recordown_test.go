package server

import (
	"context"
	"errors"
	"testing"

	"github.com/legionbsd/legion/cluster/dispatcher"
	"github.com/legionbsd/legion/cluster/dispatcher/dispatchertest"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/store/storetest"
)

// Init records the first manager's certificate while the manager already
// serves: its own agent may have recorded that very certificate first (on
// first use), which is no clash; another certificate of the name is. Once
// a lab's init failed so: "a certificate was already issued for this node
// name".
func TestInitRecordsItsOwnCertificateRecordedFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.Solo(t, nil)
	ca := dispatchertest.NewCA(t)
	_, bundle := dispatchertest.Issue(t, ca, "m1", pki.RoleManager)
	own, err := pki.ParseCert(bundle)
	if err != nil {
		t.Fatal(err)
	}
	if err := dispatcher.RecordCert(ctx, st, own, true); err != nil { // the agent's first use
		t.Fatal(err)
	}
	if err := recordOwn(ctx, st, bundle); err != nil {
		t.Fatalf("recording the manager's certificate its agent recorded first: %v", err)
	}
	_, other := dispatchertest.Issue(t, ca, "m1", pki.RoleManager)
	if err := recordOwn(ctx, st, other); !errors.Is(err, dispatcher.ErrIssued) {
		t.Fatalf("another certificate of the name: %v, want ErrIssued", err)
	}
	_, fresh := dispatchertest.Issue(t, ca, "m2", pki.RoleManager)
	if err := recordOwn(ctx, st, fresh); err != nil {
		t.Fatalf("a name with no record: %v", err)
	}
}
