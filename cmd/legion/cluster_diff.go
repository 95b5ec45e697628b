package main

import (
	"bytes"
	"fmt"
	"maps"
	"strings"

	"github.com/legionbsd/legion"
	"go.yaml.in/yaml/v3"
)

// unifiedDiff renders the line differences of a and b as a unified diff
// with three lines of context ("" when they are equal).
func unifiedDiff(nameA, nameB, a, b string) string {
	x, y := splitLines(a), splitLines(b)
	ops := diffLines(x, y)
	if len(ops) == 0 {
		return ""
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "--- %s\n+++ %s\n", nameA, nameB)
	const ctx = 3
	// Group edits with their context into hunks.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-ctx, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		aStart, bStart, aLen, bLen := ops[start].ai, ops[start].bi, 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				aLen++
			}
			if op.kind != '-' {
				bLen++
			}
		}
		fmt.Fprintf(&sb, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, op := range ops[start:end] {
			fmt.Fprintf(&sb, "%c%s\n", op.kind, op.line)
		}
		i = end
	}
	return sb.String()
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

type diffOp struct {
	kind   byte // ' ', '-', '+'
	line   string
	ai, bi int // positions in a and b before this line
}

// diffLines is a longest-common-subsequence line diff; nil when equal.
// Manifests are small, so the quadratic table is fine.
func diffLines(a, b []string) []diffOp {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	changed := false
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i], i, j})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, diffOp{'-', a[i], i, j})
			i++
			changed = true
		default:
			ops = append(ops, diffOp{'+', b[j], i, j})
			j++
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return ops
}

// diffViews renders the live and applied sides of an object for diff
// (before is nil for a new object). A Secret's value never shows: both
// sides give its size and whether it changed.
func diffViews(prev, obj legion.Object) (before, after []byte, err error) {
	if s, ok := obj.(*legion.Secret); ok {
		var old *legion.Secret
		if prev != nil {
			old, _ = prev.(*legion.Secret)
		}
		return secretViews(old, s)
	}
	if prev != nil {
		if before, err = diffView(prev); err != nil {
			return nil, nil, err
		}
	}
	after, err = diffView(obj)
	return before, after, err
}

func secretViews(prev, s *legion.Secret) (before, after []byte, err error) {
	view := func(o *legion.Secret, state string) ([]byte, error) {
		labels := map[string]string{}
		maps.Copy(labels, o.Metadata.Labels)
		data := fmt.Sprintf("(secret data: %d bytes, %s)", len(o.Spec.Data), state)
		return yaml.Marshal(map[string]any{"labels": labels, "spec": map[string]any{"data": data}})
	}
	state := "new"
	if prev != nil {
		// A change of the same size must still differ line for line,
		// or diff would exit 1 and print nothing.
		state, was := "unchanged", "unchanged"
		if !bytes.Equal(prev.Spec.Data, s.Spec.Data) {
			state, was = "changed", "live"
		}
		if before, err = view(prev, was); err != nil {
			return nil, nil, err
		}
		after, err = view(s, state)
		return before, after, err
	}
	after, err = view(s, state)
	return before, after, err
}
