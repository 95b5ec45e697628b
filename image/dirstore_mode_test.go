package image

import (
	"context"
	"os"
	"testing"
)

// A layer without a "./" entry still gives a root of mode 0755, so a
// container running as a user other than root can reach its files.
func TestDirStoreRootIsNotPrivate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := NewDirStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const chain = "sha256:0000000000000000000000000000000000000000000000000000000000000001"
	p, err := s.BeginLayer(ctx, chain, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(p.Dir()+"/app", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := p.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	root, err := s.PrepareRoot(ctx, "c1", chain)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{s.LayerDir(chain), root} {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o755 {
			t.Errorf("%s is %v, want 0755", dir, fi.Mode().Perm())
		}
	}
}
