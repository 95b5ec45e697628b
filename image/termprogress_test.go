package image

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

func TestTermProgressGolden(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := &TermProgress{W: &buf}
	a := "sha256:" + "aaaaaaaaaaaaaaaa" + "0000000000000000000000000000000000000000000000000"
	b := "sha256:" + "bbbbbbbbbbbbbbbb" + "0000000000000000000000000000000000000000000000000"
	c := "sha256:" + "cccccccccccccccc" + "0000000000000000000000000000000000000000000000000"
	p.Skipped("img", c)
	p.Start("img", a, 4<<20)
	p.Advance("img", a, 1<<20)
	p.Advance("img", a, 3<<20)
	p.Done("img", a, nil)
	p.Start("img", b, 2048)
	p.Advance("img", b, 1024)
	p.Done("img", b, errors.New("layer blob: digest mismatch"))
	golden := filepath.Join("testdata", "termprogress.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(want, buf.Bytes()) {
		t.Fatalf("output differs from %s:\n got %q\nwant %q", golden, buf.Bytes(), want)
	}
}

// Layers coming in at once share the line; each still ends on a line of
// its own.
func TestTermProgressSeveralLayers(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p := &TermProgress{W: &buf}
	a := "sha256:" + "aaaaaaaaaaaa" + "0000"
	b := "sha256:" + "bbbbbbbbbbbb" + "0000"
	p.Start("img", a, 4<<20)
	p.Start("img", b, 2<<20)
	buf.Reset()
	p.Advance("img", b, 1<<20)
	if got, want := buf.String(), "\r\033[Kaaaaaaaaaaaa   0%  bbbbbbbbbbbb  50%  1.0 MiB"; got != want {
		t.Fatalf("line %q; want %q", got, want)
	}
	buf.Reset()
	p.Done("img", b, nil)
	if got, want := buf.String(), "\r\033[Kbbbbbbbbbbbb [==============================] 100% 2.0 MiB done\n\r\033[Kaaaaaaaaaaaa [                              ]   0% 0 B"; got != want {
		t.Fatalf("after b: %q; want %q", got, want)
	}
}
