package packaging

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReleaseTarball runs the release script for freebsd/amd64 (arm64 is
// the same loop, and no file of the project is built for one architecture
// only) and checks what an operator
// unpacks: a FreeBSD amd64 binary stamped with the version asked for, the
// rc script with its prefix filled in, the man pages and the licence, and
// a SHA256SUMS that verifies.
func TestReleaseTarball(t *testing.T) {
	t.Parallel()
	out := t.TempDir()
	cmd := exec.Command("bash", "release", "0.0.0-test")
	cmd.Env = append(os.Environ(), "OUT="+out, "ARCHES=amd64", "TRIMPATH=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("release: %v\n%s", err, b)
	}
	const top = "legion-0.0.0-test-freebsd-amd64/"
	files := untar(t, filepath.Join(out, "legion-0.0.0-test-freebsd-amd64.tar.gz"))

	bin, ok := files[top+"bin/legion"]
	if !ok {
		t.Fatalf("no bin/legion in the tarball: %v", names(files))
	}
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("bin/legion is not an ELF binary: %v", err)
	}
	if f.OSABI != elf.ELFOSABI_FREEBSD || f.Machine != elf.EM_X86_64 {
		t.Errorf("bin/legion is for %v/%v, want FreeBSD x86-64", f.OSABI, f.Machine)
	}
	if !bytes.Contains(bin, []byte("0.0.0-test")) {
		t.Error("bin/legion does not carry the version it was released as")
	}

	rc := string(files[top+"etc/rc.d/legion"])
	if !strings.Contains(rc, "/usr/local/bin/legion daemon") || strings.Contains(rc, "%%") {
		t.Errorf("etc/rc.d/legion is not the port's script with its prefix filled in:\n%s", rc)
	}
	for _, page := range []string{"legion.1.gz", "legion-daemon.1.gz", "legion-get.1.gz", "legion-node-drain.1.gz"} {
		gz, ok := files[top+"share/man/man1/"+page]
		if !ok {
			t.Errorf("no man page %s in the tarball", page)
			continue
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		text, _ := io.ReadAll(zr)
		if !bytes.Contains(text, []byte(`.TH "LEGION" "1"`)) {
			t.Errorf("%s is not a section 1 man page:\n%.200s", page, text)
		}
	}
	if lic := files[top+"share/licenses/legion/LICENSE"]; !bytes.HasPrefix(lic, []byte("BSD 2-Clause")) {
		t.Error("the licence is missing from the tarball")
	}

	sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q", sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.Sum256(b)
		if hex.EncodeToString(h[:]) != sum {
			t.Errorf("SHA256SUMS: %s does not match", name)
		}
		checked++
	}
	if checked != 1 {
		t.Errorf("SHA256SUMS lists %d tarballs, want 1", checked)
	}
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := gzip.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files := map[string][]byte{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s is owned by %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

func names(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
