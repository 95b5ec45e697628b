package server_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/testcluster"
	"google.golang.org/grpc/codes"
)

// resealWait bounds how long a manager may take to follow the autolock
// setting: the recheck period with room for a loaded machine.
const resealWait = 20 * time.Second

func configNamed(name string) legion.Object {
	o, _ := legion.New(legion.KindConfig)
	o.GetMetadata().Name = name
	o.(*legion.Config).Spec.Text = name
	return o
}

var managerKeys = []string{pki.CAKeyFile, pki.NodeKeyFile, server.StoreKeyFile}

// sealedUnder says whether every key of the manager is sealed under k
// (nil: all in the clear) and in that form only.
func sealedUnder(t *testing.T, m *testcluster.Manager, k string) bool {
	t.Helper()
	dir := filepath.Join(m.Dir, server.PKIDir)
	for _, n := range managerKeys {
		f, err := pki.FormOf(dir, n)
		if err != nil {
			t.Fatal(err)
		}
		if k == "" && (!f.Clear || f.Sealed != "") || k != "" && (f.Clear || f.Sealed != k) {
			return false
		}
	}
	return true
}

// clearSecrets lists the files under dir holding a PEM private key or one
// of the raw store keys (admin.pem, the CLI's, is not sealed).
func clearSecrets(t *testing.T, dir string, storeKeys [][]byte) []string {
	t.Helper()
	var found []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == server.AdminFile {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if bytes.Contains(data, []byte("PRIVATE KEY")) {
			found = append(found, p+" (PEM private key)")
		}
		for _, k := range storeKeys {
			if bytes.Contains(data, k) {
				found = append(found, p+" (store key)")
			}
		}
		return nil
	})
	return found
}

func pkiSnapshot(t *testing.T, m *testcluster.Manager) map[string]string {
	t.Helper()
	out := map[string]string{}
	dir := filepath.Join(m.Dir, server.PKIDir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = string(data)
	}
	return out
}

func TestAutolockEndToEnd(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 3})
	ctx := context.Background()
	admin := c.Client()
	var storeKeys [][]byte
	for _, m := range c.Managers {
		k, err := os.ReadFile(filepath.Join(m.Dir, server.PKIDir, server.StoreKeyFile))
		if err != nil {
			t.Fatal(err)
		}
		storeKeys = append(storeKeys, k)
	}
	if _, err := admin.Autolock(ctx, client.AutolockShow); client.Code(err) != codes.FailedPrecondition {
		t.Fatalf("show before enable: %v, want FailedPrecondition", err)
	}
	r1, err := admin.Autolock(ctx, client.AutolockEnable)
	if err != nil || r1.LeaderKeys != "" {
		t.Fatalf("enable: %+v, %v", r1, err)
	}
	key1 := r1.Key
	k1, err := pki.ParseUnlockKey(key1)
	if err != nil {
		t.Fatalf("enable printed %q: %v", key1, err)
	}
	// The leader seals its keys before it answers, not at its next
	// check: one manager restarted at once is locked.
	if leader := c.WaitLeader(); !sealedUnder(t, leader, k1.Fingerprint()) {
		t.Fatal("enable answered before the leader sealed its keys")
	}
	if shown, err := admin.Autolock(ctx, client.AutolockShow); err != nil || shown.Key != key1 {
		t.Fatalf("show = %q, %v; want %q", shown, err, key1)
	}
	for _, m := range c.Managers {
		testcluster.WaitFor(t, "manager "+m.Addr+" to seal its keys", resealWait, func() bool { return sealedUnder(t, m, k1.Fingerprint()) })
	}
	for _, m := range c.Managers {
		if found := clearSecrets(t, m.Dir, storeKeys); len(found) > 0 {
			t.Fatalf("keys in the clear with autolock on: %v", found)
		}
	}

	// A restarted manager is locked: only Unlock, from its own host.
	m := c.Managers[2]
	m.Restart()
	// An admin client checks the cluster's CA, which a locked manager
	// cannot answer with: the handshake fails naming the lock.
	if _, err := c.ClientTo(m).Get(ctx, legion.KindConfig, "default", "x"); err == nil || !strings.Contains(err.Error(), "manager is locked: run legion unlock") {
		t.Fatalf("API of a locked manager: %v, want a refusal naming the lock", err)
	}
	// Without credentials, every call but Unlock is refused the same way.
	if _, err := m.Bare().Status(ctx); client.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "manager is locked: run legion unlock") {
		t.Fatalf("status of a locked manager: %v, want FailedPrecondition naming the lock", err)
	}
	if m.Store() != nil {
		t.Fatal("a locked manager opened its store")
	}
	before := pkiSnapshot(t, m)
	wrong, _ := pki.NewUnlockKey()
	if _, err := m.Bare().Unlock(ctx, wrong.String()); client.Code(err) != codes.PermissionDenied {
		t.Fatalf("unlock with a wrong key: %v, want PermissionDenied", err)
	}
	if _, err := m.Bare().Unlock(ctx, "LGN-UNLOCK-nonsense"); client.Code(err) != codes.InvalidArgument {
		t.Fatalf("unlock with a malformed key: %v, want InvalidArgument", err)
	}
	if after := pkiSnapshot(t, m); !mapsEqual(before, after) || m.Store() != nil {
		t.Fatal("a refused unlock changed the manager")
	}
	if _, err := m.Bare().Unlock(ctx, key1); err != nil {
		t.Fatalf("unlock: %v", err)
	}
	if _, err := c.ClientTo(m).ApplyOne(ctx, configNamed("after-unlock"), client.ApplyOptions{}); err != nil {
		t.Fatalf("write through the unlocked manager: %v", err)
	}
	if _, err := m.Bare().Unlock(ctx, key1); client.Code(err) != codes.FailedPrecondition {
		t.Fatalf("unlock of an unlocked manager: %v, want FailedPrecondition", err)
	}

	// Rotate while a manager is down: it comes back with the old key,
	// then reseals under the new one. Stopping the leader elects another,
	// and a rotation under way then has an unknown outcome: it is asked
	// again, as the error says to (a second rotation is one more new key;
	// the last one is the key).
	m.Stop()
	var r2 client.AutolockResult
	for try := 1; ; try++ {
		r2, err = c.ClientTo(c.Managers[0]).Autolock(ctx, client.AutolockRotate)
		if !errors.Is(err, client.ErrOutcomeUnknown) || try == 3 {
			break
		}
		t.Logf("rotate, try %d: %v", try, err)
	}
	if err != nil || r2.LeaderKeys != "" {
		t.Fatalf("rotate: %+v, %v", r2, err)
	}
	key2 := r2.Key
	k2, _ := pki.ParseUnlockKey(key2)
	if key2 == key1 {
		t.Fatal("rotate kept the key")
	}
	for _, o := range c.Managers[:2] {
		testcluster.WaitFor(t, "manager "+o.Addr+" to reseal", resealWait, func() bool { return sealedUnder(t, o, k2.Fingerprint()) })
	}
	if !sealedUnder(t, m, k1.Fingerprint()) {
		t.Fatal("the stopped manager's keys changed")
	}
	m.Restart()
	if _, err := m.Bare().Unlock(ctx, key2); client.Code(err) != codes.PermissionDenied {
		t.Fatalf("unlock with the key of a rotation it missed: %v, want PermissionDenied", err)
	}
	if _, err := m.Bare().Unlock(ctx, key1); err != nil {
		t.Fatalf("unlock with the key it last sealed with: %v", err)
	}
	testcluster.WaitFor(t, "the returning manager to reseal under the new key", resealWait, func() bool { return sealedUnder(t, m, k2.Fingerprint()) })

	// Disable: every manager writes its keys in the clear again, the
	// leader before it answers.
	if r, err := admin.Autolock(ctx, client.AutolockDisable); err != nil || r.LeaderKeys != "" {
		t.Fatalf("disable: %+v, %v", r, err)
	}
	if !sealedUnder(t, c.WaitLeader(), "") {
		t.Fatal("disable answered before the leader wrote its keys in the clear")
	}
	for _, o := range c.Managers {
		testcluster.WaitFor(t, "manager "+o.Addr+" to unseal", resealWait, func() bool { return sealedUnder(t, o, "") })
	}
	m.Restart()
	if _, err := c.ClientTo(m).ApplyOne(ctx, configNamed("after-disable"), client.ApplyOptions{}); err != nil {
		t.Fatalf("write through a manager restarted after disable: %v", err)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestAutolockUnknownAction(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 1})
	if _, err := c.Client().Autolock(context.Background(), "explode"); client.Code(err) != codes.InvalidArgument {
		t.Fatalf("unknown action: %v, want InvalidArgument", err)
	}
}
