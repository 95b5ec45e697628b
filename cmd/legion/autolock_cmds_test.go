package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legionbsd/legion/cluster/pki"
	"github.com/legionbsd/legion/cluster/server"
	"github.com/legionbsd/legion/internal/testcluster"
)

// sealedAll says whether the manager's CA, node and store keys are all
// sealed under fp and not in the clear.
func sealedAll(t *testing.T, dir, fp string) bool {
	t.Helper()
	for _, n := range []string{pki.CAKeyFile, pki.NodeKeyFile, server.StoreKeyFile} {
		f, err := pki.FormOf(filepath.Join(dir, server.PKIDir), n)
		if err != nil {
			t.Fatal(err)
		}
		if f.Clear || f.Sealed != fp {
			return false
		}
	}
	return true
}

// legion autolock enable|show, then legion unlock from stdin and from
// --key-file, and legion restore of a locked manager's data directory.
func TestAutolockCommands(t *testing.T) {
	t.Parallel()
	c := testcluster.New(t, testcluster.Options{Managers: 1})
	m := c.Managers[0]
	flags := []string{"--server", m.Addr, "--credentials", c.AdminFile()}
	out, err := runLegion(t, "", append([]string{"autolock", "enable"}, flags...)...)
	if err != nil {
		t.Fatalf("autolock enable: %v", err)
	}
	key, note, _ := strings.Cut(out, "\n") // the key on stdout, the note on stderr
	k, err := pki.ParseUnlockKey(key)
	if err != nil {
		t.Fatalf("autolock enable printed %q: %v", out, err)
	}
	// The one manager leads: its keys are sealed as enable answers, as
	// the note says, and a restart right away is locked.
	if !strings.HasPrefix(note, "The leader has sealed its private keys under this key") || !sealedAll(t, m.Dir, k.Fingerprint()) {
		t.Fatalf("autolock enable said %q; keys sealed: %v", note, sealedAll(t, m.Dir, k.Fingerprint()))
	}
	if out, err := runLegion(t, "", append([]string{"autolock", "show"}, flags...)...); err != nil || strings.TrimSpace(out) != key {
		t.Fatalf("autolock show = %q, %v; want %q", out, err, key)
	}

	m.Restart()
	if _, err := runLegion(t, "", "unlock", "--server", m.Addr); err == nil || !strings.Contains(err.Error(), "no key in stdin") {
		t.Fatalf("unlock with nothing on stdin: %v", err)
	}
	other, _ := pki.NewUnlockKey()
	if _, err := runLegion(t, other.String()+"\n", "unlock", "--server", m.Addr); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("unlock with another key: %v, want a refusal", err)
	}
	keyFile := filepath.Join(t.TempDir(), "unlock.key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := runLegion(t, "", "unlock", "--server", m.Addr, "--key-file", keyFile); err != nil || !strings.Contains(out, "unlocked") {
		t.Fatalf("unlock --key-file: %q, %v", out, err)
	}

	// Restore of a locked data directory needs the unlock key.
	m.Stop()
	if _, err := runLegion(t, "", "restore", "--data-dir", m.Dir); err == nil || !strings.Contains(err.Error(), "--unlock-key-file") {
		t.Fatalf("restore of a locked manager without its key: %v, want a refusal naming --unlock-key-file", err)
	}
	if out, err := runLegion(t, "", "restore", "--data-dir", m.Dir, "--unlock-key-file", keyFile); err != nil || !strings.Contains(out, "restored") {
		t.Fatalf("restore --unlock-key-file: %q, %v", out, err)
	}
	if !sealedAll(t, m.Dir, k.Fingerprint()) {
		t.Fatal("restore changed the form of the keys")
	}
}
