package pki

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func mustUnlockKey(t *testing.T) UnlockKey {
	t.Helper()
	k, err := NewUnlockKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestUnlockKeyText(t *testing.T) {
	t.Parallel()
	k := mustUnlockKey(t)
	s := k.String()
	if !strings.HasPrefix(s, UnlockPrefix) {
		t.Fatalf("%q: want prefix %s", s, UnlockPrefix)
	}
	back, err := ParseUnlockKey(" " + s + "\n")
	if err != nil || back != k {
		t.Fatalf("ParseUnlockKey(%q) = %v, %v; want the key back", s, back, err)
	}
	for _, bad := range []string{"", "LGN-1-abc", UnlockPrefix + "!!", UnlockPrefix + "AAAA"} {
		if _, err := ParseUnlockKey(bad); err == nil {
			t.Errorf("ParseUnlockKey(%q): accepted", bad)
		}
	}
}

func TestSealKeyRoundTrip(t *testing.T) {
	t.Parallel()
	k, other := mustUnlockKey(t), mustUnlockKey(t)
	clear := []byte("-----BEGIN EC PRIVATE KEY-----\nsecret\n-----END EC PRIVATE KEY-----\n")
	sealed, err := SealKey(k, "ca.key", clear)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("secret")) || bytes.Contains(sealed, []byte("PRIVATE KEY")) {
		t.Fatal("sealed form holds the key in the clear")
	}
	if fp, ok := SealedUnder(sealed); !ok || fp != k.Fingerprint() {
		t.Fatalf("SealedUnder = %q, %v; want %q", fp, ok, k.Fingerprint())
	}
	got, err := OpenKey(k, "ca.key", sealed)
	if err != nil || !bytes.Equal(got, clear) {
		t.Fatalf("OpenKey = %q, %v; want the key back", got, err)
	}
	if _, err := OpenKey(other, "ca.key", sealed); !errors.Is(err, ErrWrongUnlockKey) {
		t.Fatalf("OpenKey with another key: %v, want ErrWrongUnlockKey", err)
	}
	// Bound to the name: moved to another key's file, it does not open.
	if _, err := OpenKey(k, "node.key", sealed); !errors.Is(err, ErrWrongUnlockKey) {
		t.Fatalf("OpenKey under another name: %v, want ErrWrongUnlockKey", err)
	}
	tampered := bytes.Clone(sealed)
	tampered[len(tampered)-1] ^= 1
	if _, err := OpenKey(k, "ca.key", tampered); err == nil {
		t.Fatal("OpenKey of a tampered file: accepted")
	}
}

func TestSealedFileRenamedDoesNotOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := mustUnlockKey(t)
	keys := map[string][]byte{"ca.key": []byte("ca secret"), "node.key": []byte("node secret")}
	writeKeys(t, dir, keys)
	if err := Reseal(dir, keys, &k); err != nil {
		t.Fatal(err)
	}
	// Swap the two sealed files: neither opens under its new name.
	a, b := filepath.Join(dir, "ca.key"+SealedSuffix), filepath.Join(dir, "node.key"+SealedSuffix)
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	os.WriteFile(a, db, 0o600)
	os.WriteFile(b, da, 0o600)
	if _, err := ReadKeys(dir, []string{"ca.key", "node.key"}, &k); !errors.Is(err, ErrWrongUnlockKey) {
		t.Fatalf("ReadKeys of swapped files: %v, want ErrWrongUnlockKey", err)
	}
}

func writeKeys(t *testing.T, dir string, keys map[string][]byte) {
	t.Helper()
	for n, v := range keys {
		if err := os.WriteFile(filepath.Join(dir, n), v, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// checkOneForm checks that each key is kept in one form (want's), with
// nothing of a reseal left, and reads back as it was.
func checkOneForm(t *testing.T, dir string, keys map[string][]byte, want *UnlockKey) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), resealSuffix) || strings.HasPrefix(e.Name(), ResealMarker) {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	for n := range keys {
		f, err := FormOf(dir, n)
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			if !f.Clear || f.Sealed != "" {
				t.Errorf("%s: form %+v, want in the clear only", n, f)
			}
		} else if f.Clear || f.Sealed != want.Fingerprint() {
			t.Errorf("%s: form %+v, want sealed under %s only", n, f, want.Fingerprint())
		}
	}
	got, err := ReadKeys(dir, sortedNames(keys), want)
	if err != nil {
		t.Fatal(err)
	}
	for n, v := range keys {
		if !bytes.Equal(got[n], v) {
			t.Errorf("%s: %q, want %q", n, got[n], v)
		}
	}
}

func sortedNames(keys map[string][]byte) []string {
	var out []string
	for n := range keys {
		out = append(out, n)
	}
	return out
}

// TestResealResumedAfterCrash stops a reseal at every step, as a crash
// would, and checks that FinishReseal (a restart) leaves each key in
// exactly one form: the old one before the marker, the new one after.
func TestResealResumedAfterCrash(t *testing.T) {
	t.Parallel()
	k1, k2 := mustUnlockKey(t), mustUnlockKey(t)
	keys := map[string][]byte{"ca.key": []byte("ca"), "node.key": []byte("node"), "store.key": []byte("store")}
	for _, c := range []struct {
		name     string
		from, to *UnlockKey
	}{{"seal", nil, &k1}, {"rotate", &k1, &k2}, {"unseal", &k2, nil}} {
		// Every step the reseal goes through, in order.
		var steps []resealStep
		dir := t.TempDir()
		writeKeys(t, dir, keys)
		if c.from != nil {
			if err := Reseal(dir, keys, c.from); err != nil {
				t.Fatal(err)
			}
		}
		if err := reseal(dir, keys, c.to, func(s resealStep) bool { steps = append(steps, s); return false }); err != nil {
			t.Fatal(err)
		}
		if len(steps) != 3*len(keys)+1 {
			t.Fatalf("%s: steps %v, want %d", c.name, steps, 3*len(keys)+1)
		}
		for i, stopAt := range steps {
			dir := t.TempDir()
			writeKeys(t, dir, keys)
			if c.from != nil {
				if err := Reseal(dir, keys, c.from); err != nil {
					t.Fatal(err)
				}
			}
			err := reseal(dir, keys, c.to, func(s resealStep) bool { return s == stopAt })
			if !errors.Is(err, errStopped) {
				t.Fatalf("%s at %s: %v, want stopped", c.name, stopAt, err)
			}
			if err := FinishReseal(dir); err != nil {
				t.Fatalf("%s at %s: FinishReseal: %v", c.name, stopAt, err)
			}
			want := c.to
			if i < len(keys) { // before the marker: nothing changed
				want = c.from
			}
			t.Run(c.name+"/"+string(stopAt), func(t *testing.T) { checkOneForm(t, dir, keys, want) })
		}
	}
}

func TestReadKeysLocked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	k := mustUnlockKey(t)
	keys := map[string][]byte{"ca.key": []byte("ca")}
	writeKeys(t, dir, keys)
	if sealed, _ := AnySealed(dir, []string{"ca.key"}); sealed {
		t.Fatal("AnySealed before sealing")
	}
	if err := Reseal(dir, keys, &k); err != nil {
		t.Fatal(err)
	}
	if sealed, _ := AnySealed(dir, []string{"ca.key"}); !sealed {
		t.Fatal("AnySealed after sealing: false")
	}
	if _, err := ReadKeys(dir, []string{"ca.key"}, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("ReadKeys without a key: %v, want ErrLocked", err)
	}
}
