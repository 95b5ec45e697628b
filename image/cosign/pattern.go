package cosign

import (
	"fmt"
	"strings"
)

// ValidatePattern accepts registry[:port]/path patterns: the registry
// written whole (no wildcard), no tag or digest, ** only as a whole
// segment.
func ValidatePattern(p string) error {
	segs := strings.Split(p, "/")
	if len(segs) < 2 || segs[0] == "" {
		return fmt.Errorf("pattern %q: want registry[:port]/path", p)
	}
	reg := segs[0]
	if !strings.ContainsAny(reg, ".:") && reg != "localhost" {
		return fmt.Errorf("pattern %q: %q is no registry (name one, e.g. docker.io/library/*)", p, reg)
	}
	if strings.Contains(reg, "*") {
		return fmt.Errorf("pattern %q: the registry is matched whole, without wildcards", p)
	}
	if strings.Contains(p, "@") {
		return fmt.Errorf("pattern %q: holds a digest; name repositories only", p)
	}
	for _, s := range segs[1:] {
		if s == "" {
			return fmt.Errorf("pattern %q: empty segment", p)
		}
		if strings.Contains(s, ":") {
			return fmt.Errorf("pattern %q: holds a tag; name repositories only", p)
		}
		if strings.Contains(s, "**") && s != "**" {
			return fmt.Errorf("pattern %q: ** must be a whole segment", p)
		}
	}
	return nil
}

// Match reports whether a normalised repository (docker.io/library/nginx)
// matches a pattern: the registry exactly, * within one segment, ** across
// any number of whole segments, none included.
func Match(pattern, repository string) bool {
	ps, rs := strings.Split(pattern, "/"), strings.Split(repository, "/")
	if len(ps) == 0 || len(rs) == 0 || ps[0] != rs[0] {
		return false
	}
	return matchSegs(ps[1:], rs[1:])
}

func matchSegs(ps, rs []string) bool {
	if len(ps) == 0 {
		return len(rs) == 0
	}
	if ps[0] == "**" {
		for i := 0; i <= len(rs); i++ {
			if matchSegs(ps[1:], rs[i:]) {
				return true
			}
		}
		return false
	}
	if len(rs) == 0 || !globSeg(ps[0], rs[0]) {
		return false
	}
	return matchSegs(ps[1:], rs[1:])
}

// globSeg matches one segment where * stands for any run of characters.
func globSeg(p, s string) bool {
	parts := strings.Split(p, "*")
	if len(parts) == 1 {
		return p == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, mid := range parts[1 : len(parts)-1] {
		i := strings.Index(s, mid)
		if i < 0 {
			return false
		}
		s = s[i+len(mid):]
	}
	last := parts[len(parts)-1]
	return len(s) >= len(last) && strings.HasSuffix(s, last)
}
