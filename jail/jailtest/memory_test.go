package jailtest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/legionbsd/legion/jail"
	"go.uber.org/goleak"
)

func TestMemoryConformance(t *testing.T) {
	defer goleak.VerifyNone(t)
	RunConformance(t, func(t *testing.T) jail.Runtime {
		m := NewMemory()
		t.Cleanup(m.Close)
		return m
	})
}

func TestParseScript(t *testing.T) {
	got, err := parseScript("trap 'exit 0' TERM; echo a  b >&2\nsleep 1 & wait")
	if err != nil {
		t.Fatal(err)
	}
	var words [][]string
	for _, s := range got {
		words = append(words, s.words)
	}
	want := [][]string{{"trap", "exit 0", "TERM"}, {"echo", "a", "b", ">&2"}, {"sleep", "1", "&"}, {"wait"}}
	if d := cmp.Diff(want, words); d != "" {
		t.Fatalf("statements (-want +got):\n%s", d)
	}
	if _, err := parseScript("echo 'open"); err == nil {
		t.Fatal("an unterminated quote must fail")
	}
}
