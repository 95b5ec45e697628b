package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"github.com/legionbsd/legion/client"
	"k8s.io/client-go/util/jsonpath"
)

// fieldWait is kubectl wait's --for=jsonpath='{EXPR}'=VALUE: a field of
// the object, as -o jsonpath reads it, equal to VALUE, or without
// =VALUE, present and not empty.
type fieldWait struct {
	expr, value string
	hasValue    bool
	path        *jsonpath.JSONPath
}

// parseFieldWait reads what follows jsonpath= in --for: an expression in
// braces, then =VALUE or nothing.
func parseFieldWait(s string) (*fieldWait, error) {
	end := strings.LastIndex(s, "}")
	if !strings.HasPrefix(s, "{") || end < 0 {
		return nil, fmt.Errorf("jsonpath=%s: expected {EXPRESSION}=VALUE, as in jsonpath='{.status.replicas}'=3", s)
	}
	expr, rest := s[:end+1], s[end+1:]
	w := &fieldWait{expr: expr}
	switch {
	case rest == "":
	case strings.HasPrefix(rest, "="):
		w.value, w.hasValue = strings.Trim(rest[1:], `'"`), true
	default:
		return nil, fmt.Errorf("jsonpath=%s: %q after the expression: expected =VALUE or nothing", s, rest)
	}
	p, err := parseJSONPath(expr)
	if err != nil {
		return nil, fmt.Errorf("jsonpath=%s: %w", expr, err)
	}
	p.AllowMissingKeys(true)
	w.path = p
	return w, nil
}

// holds reports whether o's field is as the wait asks, and what it is.
func (w *fieldWait) holds(o legion.Object) (bool, string, error) {
	data, err := generic(o)
	if err != nil {
		return false, "", err
	}
	var b bytes.Buffer
	if err := w.path.Execute(&b, data); err != nil {
		return false, "", err
	}
	got := b.String()
	if !w.hasValue {
		return got != "", got, nil
	}
	return got == w.value, got, nil
}

// followField follows an object until its field is as w asks, printing
// the field when it changes; the object gone fails the wait (exit 1), and
// the timeout passing first ends it with exit 2.
func followField(ctx context.Context, cl *client.Client, out io.Writer, kind legion.Kind, ns, name string, w *fieldWait, timeout time.Duration) error {
	what := refOf(kind, ns, name)
	last, said := "", false
	return pollObject(ctx, cl, kind, ns, name, timeout, func(o legion.Object, err error) (bool, error) {
		if err != nil {
			return false, &exitError{code: rolloutFailed, msg: fmt.Sprintf("%s: not found", what)}
		}
		ok, got, err := w.holds(o)
		if err != nil {
			return false, fmt.Errorf("%s: %s: %w", what, w.expr, err)
		}
		if !said || got != last {
			fmt.Fprintf(out, "%s: %s is %s\n", what, w.expr, orDash(got))
			last, said = got, true
		}
		return ok, nil
	}, func() string {
		want := "set"
		if w.hasValue {
			want = w.value
		}
		return fmt.Sprintf("%s: %s not %s within %s: %s", what, w.expr, want, timeout, orDash(last))
	})
}
