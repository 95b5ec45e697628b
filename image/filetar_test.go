package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A layer read from its temporary file (bodies copied file to file) comes
// out as the same layer read as a stream: long names, PAX records, links,
// empty and large files, and a sparse file, whose archived body is not
// its contents.
func TestLayerFromFileSameAsFromStream(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	long := "deep/" + strings.Repeat("d", 120) + "/" + strings.Repeat("n", 130)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	write := func(h *tar.Header, body string) {
		t.Helper()
		h.ModTime = t0
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	write(&tar.Header{Name: "a/", Typeflag: tar.TypeDir, Mode: 0o755}, "")
	write(&tar.Header{Name: "a/small", Size: 3}, "abc")
	write(&tar.Header{Name: "a/empty"}, "")
	write(&tar.Header{Name: "a/big", Size: int64(len(big))}, big)
	write(&tar.Header{Name: long, Size: 4, Format: tar.FormatPAX}, "long")
	write(&tar.Header{Name: "a/pax", Size: 5, PAXRecords: map[string]string{"comment": strings.Repeat("c", 700)}}, "paxed")
	write(&tar.Header{Name: "a/hard", Typeflag: tar.TypeLink, Linkname: "a/small"}, "")
	write(&tar.Header{Name: "a/sym", Typeflag: tar.TypeSymlink, Linkname: "small"}, "")
	// GNU sparse 0.1 in PAX form: 10 bytes archived, 4 KiB of contents.
	// tar.Writer leaves GNU.sparse records out, so the PAX header is an
	// entry written as a file whose type is changed afterwards.
	var recs string
	for _, kv := range [][2]string{{"GNU.sparse.major", "0"}, {"GNU.sparse.minor", "1"}, {"GNU.sparse.size", "4096"}, {"GNU.sparse.numblocks", "2"}, {"GNU.sparse.map", "0,5,4091,5"}} {
		recs += paxRecord(kv[0], kv[1])
	}
	tw.Flush()
	at := buf.Len()
	write(&tar.Header{Name: "a/PaxHeaders/sparse", Size: int64(len(recs))}, recs)
	tw.Flush()
	setTypeflag(buf.Bytes()[at:at+512], tar.TypeXHeader)
	write(&tar.Header{Name: "a/sparse", Size: 10}, "HEAD!TAIL!")
	write(&tar.Header{Name: "a/after", Size: 5}, "after")
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()

	ctx := context.Background()
	fromStream := filepath.Join(t.TempDir(), "s")
	os.Mkdir(fromStream, 0o755)
	if err := ApplyLayer(ctx, fromStream, bytes.NewReader(data), ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "layer-*.tar")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	list, err := scanLayer(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	fromFile := filepath.Join(t.TempDir(), "f")
	os.Mkdir(fromFile, 0o755)
	if err := applyScanned(ctx, fromFile, &fileTar{f: f}, list, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tree(t, fromStream), tree(t, fromFile)); d != "" {
		t.Fatalf("trees differ (-stream +file):\n%s", d)
	}
	sparseWant := "HEAD!" + strings.Repeat("\x00", 4086) + "TAIL!"
	for name, want := range map[string]string{"a/small": "abc", "a/empty": "", "a/big": big, long: "long", "a/pax": "paxed", "a/hard": "abc", "a/sparse": sparseWant, "a/after": "after"} {
		if got := readFile(t, filepath.Join(fromFile, name)); got != want {
			t.Errorf("%s from the file: %d bytes, want %d (%.20q...)", name, len(got), len(want), got)
		}
		if got := readFile(t, filepath.Join(fromStream, name)); got != want {
			t.Errorf("%s from the stream: %d bytes, want %d", name, len(got), len(want))
		}
	}
}

// paxRecord is one "LEN key=value\n" record; LEN counts itself.
func paxRecord(k, v string) string {
	n := len(k) + len(v) + 3
	n += len(strconv.Itoa(n))
	if len(strconv.Itoa(n)) != len(strconv.Itoa(n-1)) {
		n++
	}
	return strconv.Itoa(n) + " " + k + "=" + v + "\n"
}

// setTypeflag changes a ustar header block's type and its checksum.
func setTypeflag(blk []byte, typ byte) {
	blk[156] = typ
	copy(blk[148:156], "        ")
	sum := 0
	for _, b := range blk {
		sum += int(b)
	}
	copy(blk[148:156], fmt.Sprintf("%06o\x00 ", sum))
}
