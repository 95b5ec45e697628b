package compose

import (
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion"
)

func TestDNSLabel(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"web", "web"},
		{"db_data", "db-data"},
		{"Web.App", "web-app"},
		{"__x__", "x"},
		{"a--b", "a-b"},
		{"a_-_b", "a-b"},
		{"___", ""},
		{"ünïcode", "n-code"},
		{strings.Repeat("a", 62) + "_bc", strings.Repeat("a", 62)},
	}
	for _, tt := range tests {
		got := dnsLabel(tt.in)
		if got != tt.want {
			t.Errorf("dnsLabel(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got != "" {
			if err := legion.ValidName(got); err != nil {
				t.Errorf("dnsLabel(%q) = %q is not a name: %v", tt.in, got, err)
			}
		}
	}
}

func TestMergeValue(t *testing.T) {
	t.Parallel()
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	l := func(v ...any) []any { return v }
	tests := []struct {
		name             string
		base, over, want any
	}{
		{"mappings key by key", m("a", 1, "b", m("c", 2, "d", 3)), m("b", m("d", 4, "e", 5)), m("a", 1, "b", m("c", 2, "d", 4, "e", 5))},
		{"null removes", m("a", 1, "b", 2), m("a", nil), m("b", 2)},
		{"named lists by name", l(m("name", "web", "image", "x", "ports", l(1))), l(m("name", "web", "ports", l(2)), m("name", "side", "image", "y")),
			l(m("name", "web", "image", "x", "ports", l(2)), m("name", "side", "image", "y"))},
		{"other lists replaced", l("a", "b"), l("c"), l("c")},
		{"a named list over an unnamed one replaces it", l("a"), l(m("name", "x")), l(m("name", "x"))},
		{"scalars replaced", "a", "b", "b"},
		{"a probe's sort replaces the other", m("exec", m("command", l("x")), "period", "30s"), m("http", m("path", "/ready")),
			m("http", m("path", "/ready"), "period", "30s")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, mergeValue(tt.base, tt.over)); diff != "" {
				t.Errorf("merge (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnsetVariables(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SET": "1", "EMPTY": ""}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		in   string
		want []string
	}{
		{"${SET} $SET", nil},
		{"${UNSET}", []string{"UNSET"}},
		{"$UNSET_2/x", []string{"UNSET_2"}},
		{"${UNSET:-d} ${UNSET-d} ${UNSET:+x} ${EMPTY}", nil},
		{"$$UNSET $${UNSET}", nil},
		{"a ${A} b ${B}", []string{"A", "B"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, unsetVariables(tt.in, lookup)); diff != "" {
			t.Errorf("unsetVariables(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestDockerSizesAreBinary(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // canonical Legion quantity
	}{
		{"512m", "512Mi"}, {"512M", "512Mi"}, {"512mb", "512Mi"}, {"1g", "1Gi"}, {"1.5g", "1536Mi"},
		{"64k", "64Ki"}, {"2048", "2Ki"}, {"100b", "100"},
	}
	for _, tt := range tests {
		n, err := dockerBytes(tt.in)
		if err != nil {
			t.Errorf("dockerBytes(%q): %v", tt.in, err)
			continue
		}
		if got := legion.Bytes(n).String(); got != tt.want {
			t.Errorf("dockerBytes(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if _, err := dockerBytes("lots"); err == nil {
		t.Error("dockerBytes(\"lots\") did not fail")
	}
}

func TestCPUs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   float32
		want string
	}{{0.5, "500m"}, {0.1, "100m"}, {1.5, "1500m"}, {2, "2"}, {0.001, "1m"}, {0, "0"}, {-1, "0"}}
	for _, tt := range tests {
		if got := cpus(types.NanoCPUs(tt.in)).String(); got != tt.want {
			t.Errorf("cpus(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
