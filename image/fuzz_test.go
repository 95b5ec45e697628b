package image

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseDockerConfig(f *testing.F) {
	f.Add([]byte(`{"auths":{"ghcr.io":{"auth":"dTpw"}}}`))
	f.Add([]byte(`{"auths":{"https://index.docker.io/v1/":{"username":"u","password":"p"}}}`))
	f.Add([]byte(`{"auths":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := ParseDockerConfig(b)
		if err != nil {
			return
		}
		for host, login := range l {
			if host != RegistryHost(host) {
				t.Fatalf("host %q not normalised", host)
			}
			if login.Username == "" && login.IdentityToken == "" && login.RegistryToken == "" {
				t.Fatalf("login for %q without credentials", host)
			}
		}
	})
}

func FuzzParseConfigRoundTrip(f *testing.F) {
	f.Add([]byte(`{"os":"freebsd","config":{"cmd":["sh"]},"rootfs":{"type":"layers","diff_ids":[]},"x":1}`))
	f.Add([]byte(`{"Config":{"Env":["A=1"],"Extra":{"a":[1,2]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			return
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		c2, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("re-read %s: %v", out, err)
		}
		out2, err := json.Marshal(c2)
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("not stable:\n%s\n%s", out, out2)
		}
	})
}

// FuzzLayerNames: whatever the names in a layer, nothing lands outside
// the root.
func FuzzLayerNames(f *testing.F) {
	f.Add("a/b", "c", "../x")
	f.Add("s", "/", "s/x")
	f.Add(".wh..", "a/.wh..wh..opq", "./a//b/../c")
	f.Fuzz(func(t *testing.T, n1, n2, n3 string) {
		for _, n := range []string{n1, n2, n3} {
			if n == "" || strings.ContainsRune(n, 0) || len(n) > 200 {
				return
			}
		}
		dir := t.TempDir()
		root := filepath.Join(dir, "root")
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		ents := []ent{
			{name: n1, body: "x"},
			{name: "s", typ: '2', link: n2},
			{name: "s/" + n3, body: "y"},
			{name: n3, typ: '1', link: n1},
		}
		b, ok := tryTar(ents)
		if !ok {
			return // not a tar any tool could write
		}
		err := ApplyLayer(context.Background(), root, bytes.NewReader(b), ApplyOptions{})
		for _, p := range tree(t, dir) {
			if p != "root/" && !strings.HasPrefix(p, "root/") {
				t.Fatalf("wrote %q outside the root (err %v)", p, err)
			}
		}
	})
}

func tryTar(ents []ent) ([]byte, bool) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, ModTime: t0}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.body))
		}
		if tw.WriteHeader(h) != nil {
			return nil, false
		}
		if h.Typeflag == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	return buf.Bytes(), tw.Close() == nil
}

func FuzzParseReference(f *testing.F) {
	f.Add("nginx")
	f.Add("index.docker.io/library/nginx:1")
	f.Add("localhost:5000/a/b@sha256:" + strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseReference(s)
		if err != nil {
			return
		}
		// The canonical form reads back to itself.
		c := r.String()
		r2, err := ParseReference(c)
		if err != nil || r2.String() != c {
			t.Fatalf("%q -> %q -> %v, %v", s, c, r2, err)
		}
		if strings.HasPrefix(c, "index.docker.io/") {
			t.Fatalf("%q kept index.docker.io", c)
		}
	})
}
