package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"text/template"
	"text/template/parse"

	"github.com/legionbsd/legion"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
	"k8s.io/client-go/util/jsonpath"
)

// confirm says what a command did to something, in the one style every
// command uses, as kubectl does: kind/name (the kind in lower case) and
// the verb, then any detail.
func confirm(w io.Writer, kind, name, verb string, detail ...string) {
	line := strings.ToLower(kind) + "/" + name + " " + verb
	if len(detail) > 0 {
		line += " " + strings.Join(detail, " ")
	}
	fmt.Fprintln(w, line)
}

// outputChoices names every -o value a listing command takes.
const outputChoices = "table, wide, name, json, yaml, go-template=TEMPLATE, go-template-file=FILE, jsonpath=EXPR, jsonpath-file=FILE, custom-columns=HEADER:EXPR[,...]"

// outputFlag registers -o on a listing command, the same on each.
func outputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "output", "o", "table", "output format: "+outputChoices)
}

// format is a checked -o value: templates are parsed and files read
// before anything is asked of the cluster.
type format struct {
	name string // table, wide, name, json, yaml, go-template, jsonpath or custom-columns
	tmpl *template.Template
	path *jsonpath.JSONPath
	// listItems: the jsonpath expression or go-template reads kubectl's
	// List (.items), so a list is given to it as one.
	listItems bool
	columns   []customColumn
	original  string
	// noHeaders leaves a table's header line out (--no-headers).
	noHeaders bool
}

type customColumn struct {
	header string
	path   *jsonpath.JSONPath
}

// parseOutput reads an -o value.
func parseOutput(s string) (format, error) {
	name, arg, hasArg := strings.Cut(s, "=")
	f := format{name: name, original: s}
	switch name {
	case "table", "wide", "name", "json", "yaml":
		if hasArg {
			return format{}, fmt.Errorf("-o %q: %s takes no value", s, name)
		}
		return f, nil
	case "go-template-file", "jsonpath-file":
		if arg == "" {
			return format{}, fmt.Errorf("-o %s=FILE: no file named", name)
		}
		data, err := os.ReadFile(arg)
		if err != nil {
			return format{}, fmt.Errorf("-o %s: %w", name, err)
		}
		name, arg = strings.TrimSuffix(name, "-file"), strings.TrimRight(string(data), "\n")
		f.name = name
	case "go-template", "jsonpath", "custom-columns":
		if arg == "" {
			return format{}, fmt.Errorf("-o %s: expected %s=VALUE", s, name)
		}
	default:
		return format{}, fmt.Errorf("-o %q: unknown output format; expected one of %s", s, outputChoices)
	}
	var err error
	switch f.name {
	case "go-template":
		// As kubectl: a field JSON leaves out when empty is no error.
		f.tmpl, err = template.New("output").Parse(arg)
		if err == nil {
			f.listItems = templateReadsItems(f.tmpl.Tree.Root)
		}
	case "jsonpath":
		f.path, err = parseJSONPath(arg)
		if err == nil {
			f.path.AllowMissingKeys(true)
			f.listItems = readsItems(arg)
		}
	case "custom-columns":
		f.columns, err = parseCustomColumns(arg)
	}
	if err != nil {
		return format{}, fmt.Errorf("-o %s: %w", name, err)
	}
	return f, nil
}

// jsonPathTemplate is an expression in kubectl's forms as a template:
// {.a.b} as it is, and, for short, .a.b or a.b braced.
func jsonPathTemplate(expr string) string {
	if !strings.Contains(expr, "{") {
		expr = "{." + strings.TrimPrefix(expr, ".") + "}"
	}
	return expr
}

// parseJSONPath takes kubectl's forms (jsonPathTemplate).
func parseJSONPath(expr string) (*jsonpath.JSONPath, error) {
	p := jsonpath.New("output")
	if err := p.Parse(jsonPathTemplate(expr)); err != nil {
		return nil, err
	}
	return p, nil
}

// readsItems reports whether a jsonpath expression reads .items at its
// root, as kubectl's lists are read ({.items[*].metadata.name}).
// templateReadsItems says whether a go-template reads .items of its
// data where the data is the root (outside range and with, which move
// dot): it is written for kubectl's List.
func templateReadsItems(list *parse.ListNode) bool {
	if list == nil {
		return false
	}
	pipeReads := func(p *parse.PipeNode) bool {
		if p == nil {
			return false
		}
		for _, c := range p.Cmds {
			for _, a := range c.Args {
				if f, ok := a.(*parse.FieldNode); ok && len(f.Ident) > 0 && f.Ident[0] == "items" {
					return true
				}
			}
		}
		return false
	}
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.ActionNode:
			if pipeReads(n.Pipe) {
				return true
			}
		case *parse.IfNode:
			if pipeReads(n.Pipe) || templateReadsItems(n.List) || templateReadsItems(n.ElseList) {
				return true
			}
		case *parse.RangeNode:
			if pipeReads(n.Pipe) || templateReadsItems(n.ElseList) {
				return true
			}
		case *parse.WithNode:
			if pipeReads(n.Pipe) || templateReadsItems(n.ElseList) {
				return true
			}
		}
	}
	return false
}

func readsItems(expr string) bool {
	p, err := jsonpath.Parse("output", jsonPathTemplate(expr))
	if err != nil {
		return false
	}
	// Each {...} is a list of nodes; inside {range X}...{end} they read
	// X's items, not the root.
	depth := 0
	for _, n := range p.Root.Nodes {
		block, ok := n.(*jsonpath.ListNode)
		if !ok || len(block.Nodes) == 0 {
			continue
		}
		first := block.Nodes[0]
		if id, ok := first.(*jsonpath.IdentifierNode); ok {
			switch id.Name {
			case "end":
				depth = max(depth-1, 0)
				continue
			case "range":
				depth++
				if len(block.Nodes) < 2 {
					continue
				}
				first = block.Nodes[1]
				if depth > 1 {
					continue
				}
			}
		} else if depth > 0 {
			continue
		}
		if f, ok := first.(*jsonpath.FieldNode); ok && f.Value == "items" {
			return true
		}
	}
	return false
}

func parseCustomColumns(spec string) ([]customColumn, error) {
	var cols []customColumn
	for part := range strings.SplitSeq(spec, ",") {
		header, expr, ok := strings.Cut(part, ":")
		if !ok || header == "" || expr == "" {
			return nil, fmt.Errorf("column %q: expected HEADER:EXPR", part)
		}
		p, err := parseJSONPath(expr)
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", header, err)
		}
		p.AllowMissingKeys(true)
		cols = append(cols, customColumn{header: header, path: p})
	}
	return cols, nil
}

// column is a table's column; a wide one shows with -o wide only.
type column struct {
	name string
	wide bool
}

// listing is what a listing command has to show, whatever the format:
// a table row, the item as -o json prints it, and kind/name per item.
type listing struct {
	columns []column
	rows    [][]string
	items   []any
	names   []string
	// single: one object asked by name, printed alone rather than as a
	// list.
	single bool
	// none names the items in the line an empty table prints on standard
	// error ("No services found."); scope, when set, says where they were
	// looked for (userScope).
	none, scope string
}

// kindNames names each row with its item's kind, as kind/name, in the
// NAME column (kubectl's --show-kind, and listings of several kinds).
func (l *listing) kindNames() {
	if i := slices.IndexFunc(l.columns, func(c column) bool { return c.name == "NAME" }); i >= 0 {
		for r := range l.rows {
			l.rows[r][i] = l.names[r]
		}
	}
}

// add appends one item: its name (kind/name), what -o json prints of it,
// and its cells, one per column.
func (l *listing) add(name string, item any, cells ...string) {
	if len(cells) != len(l.columns) {
		panic(fmt.Sprintf("listing %s: %d cells for %d columns", name, len(cells), len(l.columns)))
	}
	l.names = append(l.names, name)
	l.items = append(l.items, item)
	l.rows = append(l.rows, cells)
}

// addColumn adds a column that shows in the table, before the wide ones;
// values has a cell per row.
func (l *listing) addColumn(name string, values []string) {
	at := len(l.columns)
	for i, c := range l.columns {
		if c.wide {
			at = i
			break
		}
	}
	l.columns = slices.Insert(l.columns, at, column{name: name})
	for i := range l.rows {
		l.rows[i] = slices.Insert(l.rows[i], at, values[i])
	}
}

// jsonValue is what -o json prints: the item alone when one was asked
// for by name, else the list.
func (l *listing) jsonValue() any {
	if l.single && len(l.items) == 1 {
		return l.items[0]
	}
	if l.items == nil {
		return []any{}
	}
	return l.items
}

// print writes the listing in format f; an empty table says so on errw.
func (l *listing) print(w, errw io.Writer, f format) error {
	switch f.name {
	case "table", "wide":
		if len(l.rows) == 0 && l.none != "" {
			_, err := fmt.Fprintf(errw, "No %s found%s.\n", l.none, l.scope)
			return err
		}
		return writeTable(w, l.columns, l.rows, f.name == "wide", !f.noHeaders)
	case "name":
		for _, n := range l.names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	case "json":
		data, err := json.MarshalIndent(l.jsonValue(), "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", data)
		return err
	case "yaml":
		for i, it := range l.items {
			data, err := yamlOf(it)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(w, "---")
			}
			if _, err := w.Write(data); err != nil {
				return err
			}
		}
		return nil
	case "custom-columns":
		cols := make([]column, len(f.columns))
		for i, c := range f.columns {
			cols[i] = column{name: c.header}
		}
		var rows [][]string
		for _, it := range l.items {
			data, err := generic(it)
			if err != nil {
				return err
			}
			row := make([]string, len(f.columns))
			for i, c := range f.columns {
				var b bytes.Buffer
				if err := c.path.Execute(&b, data); err != nil {
					return fmt.Errorf("-o custom-columns: column %s: %w", c.header, err)
				}
				row[i] = cell(b.String())
			}
			rows = append(rows, row)
		}
		return writeTable(w, cols, rows, true, !f.noHeaders)
	}
	v := l.jsonValue()
	if f.listItems && !(l.single && len(l.items) == 1) {
		// kubectl's form of a list; the bare array stays for {[*]...}.
		v = map[string]any{"kind": "List", "items": v}
	}
	data, err := generic(v)
	if err != nil {
		return err
	}
	return f.execute(w, data)
}

// execute runs a go-template or jsonpath format over data.
func (f format) execute(w io.Writer, data any) error {
	var err error
	switch f.name {
	case "go-template":
		err = f.tmpl.Execute(w, data)
	case "jsonpath":
		err = f.path.Execute(w, data)
	default:
		return fmt.Errorf("-o %s: not a template", f.original)
	}
	if err != nil {
		return fmt.Errorf("-o %s: %w", f.name, err)
	}
	return nil
}

// writeTable aligns rows under their header; wide columns only if wide.
func writeTable(w io.Writer, cols []column, rows [][]string, wide, header bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var head []string
	for _, c := range cols {
		if wide || !c.wide {
			head = append(head, c.name)
		}
	}
	if header {
		fmt.Fprintln(tw, strings.Join(head, "\t"))
	}
	for _, r := range rows {
		var cells []string
		for i, c := range cols {
			if wide || !c.wide {
				cells = append(cells, cell(r[i]))
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// cell keeps a table's shape: no tab or line break inside a cell, a dash
// for nothing.
func cell(s string) string {
	s = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
	return orDash(s)
}

// generic turns v into the maps, lists and values its JSON is, so
// templates see the field names -o json prints.
func generic(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// yamlOf is an item as YAML: an object as manifests have it (so apply
// reads it back), anything else with its JSON field names.
func yamlOf(v any) ([]byte, error) {
	if o, ok := v.(legion.Object); ok {
		return legion.MarshalYAML(o)
	}
	// Numbers as float64, not json.Number, which YAML would quote.
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var g any
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, err
	}
	return yaml.Marshal(g)
}

// counted is n and noun, plural unless n is 1 ("1 layer", "2 layers").
func counted(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
