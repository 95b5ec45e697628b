package jail

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// ErrNoSuchUser is returned when a container's user or group is not in
// its image's databases.
var ErrNoSuchUser = errors.New("no such user or group in the image")

// Credential is who a container's process runs as.
type Credential struct {
	Name   string // empty for a uid the image does not name
	Uid    uint32
	Gid    uint32
	Groups []uint32 // supplementary groups, the primary one included
	Home   string
}

type passwdEntry struct {
	name     string
	uid, gid uint32
	home     string
}

type groupEntry struct {
	name    string
	gid     uint32
	members []string
}

// The image's databases are read as text: Linux images have no pwd.db,
// and FreeBSD images keep the text files beside it.
func readPasswd(r io.Reader) ([]passwdEntry, error) {
	var out []passwdEntry
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < 7 {
			continue // not a passwd line; skip as libc does
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, passwdEntry{name: f[0], uid: uint32(uid), gid: uint32(gid), home: f[5]})
	}
	return out, sc.Err()
}

func readGroup(r io.Reader) ([]groupEntry, error) {
	var out []groupEntry
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) < 4 {
			continue
		}
		gid, err := strconv.ParseUint(f[2], 10, 32)
		if err != nil {
			continue
		}
		var members []string
		for _, m := range strings.Split(f[3], ",") {
			if m = strings.TrimSpace(m); m != "" {
				members = append(members, m)
			}
		}
		out = append(out, groupEntry{name: f[0], gid: uint32(gid), members: members})
	}
	return out, sc.Err()
}

// ResolveUser finds user[:group] (each by name or number) in passwd and
// group text. An empty user is root. A number the image does not name is
// used as it is, with group 0 unless one is given. The supplementary
// groups are those listing the user as a member, plus the primary group.
func ResolveUser(spec string, passwd, group io.Reader) (Credential, error) {
	users, err := readPasswd(passwd)
	if err != nil {
		return Credential{}, fmt.Errorf("read passwd: %w", err)
	}
	groups, err := readGroup(group)
	if err != nil {
		return Credential{}, fmt.Errorf("read group: %w", err)
	}
	userPart, groupPart, hasGroup := strings.Cut(spec, ":")
	if userPart == "" {
		userPart = "0"
	}
	var c Credential
	found := false
	if n, err := strconv.ParseUint(userPart, 10, 32); err == nil {
		c.Uid = uint32(n)
		for _, u := range users {
			if u.uid == c.Uid {
				c.Name, c.Gid, c.Home, found = u.name, u.gid, u.home, true
				break
			}
		}
	} else {
		for _, u := range users {
			if u.name == userPart {
				c.Name, c.Uid, c.Gid, c.Home, found = u.name, u.uid, u.gid, u.home, true
				break
			}
		}
		if !found {
			return Credential{}, fmt.Errorf("user %q: %w", userPart, ErrNoSuchUser)
		}
	}
	if hasGroup && groupPart != "" {
		if n, err := strconv.ParseUint(groupPart, 10, 32); err == nil {
			c.Gid = uint32(n)
		} else {
			ok := false
			for _, g := range groups {
				if g.name == groupPart {
					c.Gid, ok = g.gid, true
					break
				}
			}
			if !ok {
				return Credential{}, fmt.Errorf("group %q: %w", groupPart, ErrNoSuchUser)
			}
		}
	}
	c.Groups = []uint32{c.Gid}
	if c.Name != "" {
		for _, g := range groups {
			if slices.Contains(g.members, c.Name) && !slices.Contains(c.Groups, g.gid) {
				c.Groups = append(c.Groups, g.gid)
			}
		}
	}
	if c.Home == "" {
		c.Home = "/"
	}
	return c, nil
}

// LookupUser resolves user in the image at root, reading its /etc/passwd
// and /etc/group without following links out of the root.
func LookupUser(root, user string) (Credential, error) {
	read := func(name string) (io.Reader, error) {
		data, err := readInRoot(root, name)
		if errors.Is(err, os.ErrNotExist) {
			return strings.NewReader(""), nil
		}
		if err != nil {
			return nil, err
		}
		return strings.NewReader(string(data)), nil
	}
	pw, err := read("/etc/passwd")
	if err != nil {
		return Credential{}, err
	}
	gr, err := read("/etc/group")
	if err != nil {
		return Credential{}, err
	}
	return ResolveUser(user, pw, gr)
}

// readInRoot reads a small file of the image, refusing a link.
func readInRoot(root, name string) ([]byte, error) {
	p := filepath.Join(root, filepath.Clean("/"+name))
	st, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s in the image: not a regular file", name)
	}
	return os.ReadFile(p)
}
