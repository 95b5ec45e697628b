package cosign

import (
	"strings"
	"testing"
)

// FuzzPattern: a valid pattern never matches another registry, and a
// pattern without wildcards matches only itself.
func FuzzPattern(f *testing.F) {
	f.Add("docker.io/library/*", "docker.io/library/nginx")
	f.Add("ghcr.io/**/app", "ghcr.io/a/b/app")
	f.Add("localhost/a*b*c", "localhost/abbc")
	f.Fuzz(func(t *testing.T, pattern, repo string) {
		if ValidatePattern(pattern) != nil {
			return
		}
		m := Match(pattern, repo)
		preg, _, _ := strings.Cut(pattern, "/")
		rreg, _, _ := strings.Cut(repo, "/")
		if m && preg != rreg {
			t.Fatalf("%q matched %q of another registry", pattern, repo)
		}
		if !strings.Contains(pattern, "*") && m != (pattern == repo) {
			t.Fatalf("literal %q vs %q: match %v", pattern, repo, m)
		}
	})
}
