package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const testPasswd = `# comment
root:*:0:0:Charlie &:/root:/bin/csh
daemon:*:1:1:Owner of many system processes:/root:/usr/sbin/nologin
nobody:*:65534:65534:Unprivileged user:/nonexistent:/usr/sbin/nologin
postgres:x:70:70:PostgreSQL:/var/lib/postgresql:/bin/sh
broken line
`

const testGroup = `wheel:*:0:root
daemon:*:1:
postgres:x:70:
ssl-cert:x:101:postgres,other
audio:x:63: postgres
nogroup:*:65533:
nobody:*:65534:
`

func TestResolveUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec    string
		want    Credential
		wantErr bool
	}{
		{"", Credential{Name: "root", Uid: 0, Gid: 0, Groups: []uint32{0}, Home: "/root"}, false},
		{"postgres", Credential{Name: "postgres", Uid: 70, Gid: 70, Groups: []uint32{70, 101, 63}, Home: "/var/lib/postgresql"}, false},
		{"70", Credential{Name: "postgres", Uid: 70, Gid: 70, Groups: []uint32{70, 101, 63}, Home: "/var/lib/postgresql"}, false},
		{"postgres:ssl-cert", Credential{Name: "postgres", Uid: 70, Gid: 101, Groups: []uint32{101, 63}, Home: "/var/lib/postgresql"}, false},
		{"nobody:65533", Credential{Name: "nobody", Uid: 65534, Gid: 65533, Groups: []uint32{65533}, Home: "/nonexistent"}, false},
		{"1000", Credential{Uid: 1000, Gid: 0, Groups: []uint32{0}, Home: "/"}, false},
		{"1000:1000", Credential{Uid: 1000, Gid: 1000, Groups: []uint32{1000}, Home: "/"}, false},
		{"ghost", Credential{}, true},
		{"postgres:ghosts", Credential{}, true},
	}
	for _, tc := range tests {
		got, err := ResolveUser(tc.spec, strings.NewReader(testPasswd), strings.NewReader(testGroup))
		if tc.wantErr {
			if !errors.Is(err, ErrNoSuchUser) {
				t.Errorf("%q: %v, want ErrNoSuchUser", tc.spec, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.spec, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%q (-want +got):\n%s", tc.spec, d)
		}
	}
}

func TestLookupUserInImage(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc"), 0o755)
	os.WriteFile(filepath.Join(root, "etc/passwd"), []byte(testPasswd), 0o644)
	// A group file that is a link out of the image is refused.
	os.Symlink("/etc/group", filepath.Join(root, "etc/group"))
	if _, err := LookupUser(root, "postgres"); err == nil {
		t.Fatal("a linked /etc/group must be refused")
	}
	os.Remove(filepath.Join(root, "etc/group"))
	c, err := LookupUser(root, "postgres")
	if err != nil || c.Uid != 70 || len(c.Groups) != 1 {
		t.Fatalf("without /etc/group: %+v %v", c, err)
	}
	// An image without databases runs numeric users only.
	empty := t.TempDir()
	if c, err := LookupUser(empty, "65534:65534"); err != nil || c.Uid != 65534 || c.Gid != 65534 {
		t.Fatalf("numeric user without databases: %+v %v", c, err)
	}
	if _, err := LookupUser(empty, "nobody"); !errors.Is(err, ErrNoSuchUser) {
		t.Fatalf("named user without databases: %v", err)
	}
}

func FuzzResolveUser(f *testing.F) {
	f.Add("postgres:ssl-cert", testPasswd, testGroup)
	f.Add("1000", "a:b:c", "::::")
	f.Fuzz(func(t *testing.T, spec, passwd, group string) {
		c, err := ResolveUser(spec, strings.NewReader(passwd), strings.NewReader(group))
		if err == nil && (len(c.Groups) == 0 || c.Groups[0] != c.Gid) {
			t.Fatalf("%q: groups %v must start with the primary %d", spec, c.Groups, c.Gid)
		}
	})
}
