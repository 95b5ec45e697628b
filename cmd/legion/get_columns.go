package main

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
)

// listFlags are kubectl get's flags that shape a listing: --show-labels,
// -L (a column per label key), --sort-by and --no-headers.
type listFlags struct {
	showLabels   bool
	showKind     bool
	labelColumns []string
	sortBy       string
	noHeaders    bool
}

func (lf *listFlags) add(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&lf.showLabels, "show-labels", false, "add a LABELS column to the table, as kubectl does")
	f.StringSliceVarP(&lf.labelColumns, "label-columns", "L", nil, "add a column with the value of each of these label keys (repeatable, or comma-separated)")
	f.StringVar(&lf.sortBy, "sort-by", "", "order the objects by a JSONPath expression of their fields, such as .metadata.name (numbers by value)")
	f.BoolVar(&lf.noHeaders, "no-headers", false, "print a table, or custom columns, without its header line")
	f.BoolVar(&lf.showKind, "show-kind", false, "name each object with its kind in the table (service/web), as kubectl does")
}

// forWatch refuses what a watch does not do (it prints each change as it
// comes, not a listing to sort) and sets what it does: a table without
// its header line, with the label columns asked for.
func (lf *listFlags) forWatch(fm *format) error {
	if lf.sortBy != "" {
		return fmt.Errorf("-w prints each change as it comes: --sort-by orders a listing")
	}
	fm.noHeaders = lf.noHeaders
	return nil
}

// apply sets what the flags ask of the format (--no-headers) and orders
// objs (--sort-by); decorate adds the columns to each table.
func (lf *listFlags) apply(fm *format, objs []legion.Object) error {
	fm.noHeaders = lf.noHeaders
	if lf.sortBy == "" {
		return nil
	}
	return sortObjects(objs, lf.sortBy)
}

// decorate adds --show-labels' and -L's columns to a table of objs and,
// with --show-kind, names each object with its kind.
func (lf *listFlags) decorate(l *listing, objs []legion.Object) {
	if lf.showKind {
		l.kindNames()
	}
	if lf.showLabels {
		addLabels(l, objs)
	}
	for _, key := range lf.labelColumns {
		vals := make([]string, len(objs))
		for i, o := range objs {
			vals[i] = o.GetMetadata().Labels[key]
		}
		// kubectl heads the column with the key's last part, upper-cased.
		head := key[strings.LastIndex(key, "/")+1:]
		l.addColumn(strings.ToUpper(head), vals)
	}
}

// sortObjects orders objs by the value of a JSONPath expression over each
// one's fields (as -o json prints them), as kubectl's --sort-by: objects
// without the field first, then numbers by value, then text; the order of
// equal ones is kept.
func sortObjects(objs []legion.Object, expr string) error {
	jp, err := parseJSONPath(expr)
	if err != nil {
		return fmt.Errorf("--sort-by %s: %w", expr, err)
	}
	jp.AllowMissingKeys(true)
	keys := make(map[legion.Object]string, len(objs))
	for _, o := range objs {
		data, err := generic(o)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := jp.Execute(&b, data); err != nil {
			return fmt.Errorf("--sort-by %s: %w", expr, err)
		}
		keys[o] = b.String()
	}
	slices.SortStableFunc(objs, func(a, b legion.Object) int {
		ra, fa := sortRank(keys[a])
		rb, fb := sortRank(keys[b])
		return cmp.Or(cmp.Compare(ra, rb), cmp.Compare(fa, fb), strings.Compare(keys[a], keys[b]))
	})
	return nil
}

// sortRank puts a missing value first, then numbers (by value), then text,
// so that the order holds across a mix of them.
func sortRank(s string) (int, float64) {
	if s == "" {
		return 0, 0
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return 1, f
	}
	return 2, 0
}
