package agent

import "testing"

func TestExpand(t *testing.T) {
	vars := map[string]string{"LEGION_POD_IP": "127.200.1.2", "NAME": "web-1-1"}
	cases := map[string]string{
		"$(LEGION_POD_IP):8080": "127.200.1.2:8080",
		"-name=$(NAME)":         "-name=web-1-1",
		"$$(NAME)":              "$(NAME)",
		"$(UNKNOWN)":            "$(UNKNOWN)",
		"plain":                 "plain",
		"$(NAME":                "$(NAME",
		"$(NAME)$(NAME)":        "web-1-1web-1-1",
	}
	for in, want := range cases {
		if got := expand(in, vars); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
