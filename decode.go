package legion

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Document is one object of a manifest as written, before admission.
type Document struct {
	Index int // from 1
	// Item is the object's place in the document's items, from 1, when
	// the document is kubectl's List (kind: List); 0 otherwise.
	Item   int
	Object Object // nil when the document could not be decoded
	Errs   ErrorList
}

// Decode parses a manifest of one or more YAML documents (JSON is YAML
// too) strictly into typed objects: unknown fields, wrong types and
// duplicate keys are errors naming the field's full path. Empty documents
// are skipped. It does not apply defaults or check values; Admit does.
func Decode(data []byte) ([]Document, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []Document
	for i := 1; ; i++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return docs, fmt.Errorf("document %d: %s", i, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		root := &n
		if root.Kind == yaml.DocumentNode {
			if len(root.Content) == 0 {
				i--
				continue
			}
			root = root.Content[0]
		}
		if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
			i--
			continue
		}
		if items, ok, errs := listItems(root); ok {
			// kubectl's List, as kubectl get -o yaml writes a listing:
			// each item an object of its own.
			if len(errs) > 0 {
				docs = append(docs, Document{Index: i, Errs: errs})
			}
			d := &decoder{budget: maxNodes} // the document's, shared by its items
			for j, item := range items {
				doc := Document{Index: i, Item: j + 1}
				doc.Object, doc.Errs = decodeObject(item, d)
				docs = append(docs, doc)
				if d.budget <= 0 {
					break // said once, of the item that spent it
				}
			}
			continue
		}
		doc := Document{Index: i}
		doc.Object, doc.Errs = decodeObject(root, &decoder{budget: maxNodes})
		docs = append(docs, doc)
	}
	return docs, nil
}

// listItems reads a document that is a list of objects: kubectl's List
// (kind List and its items, whatever its apiVersion: each item's is
// checked), or a bare list, as legion get -o json prints a listing. ok is
// false for any other document.
func listItems(n *yaml.Node) (items []*yaml.Node, ok bool, errs ErrorList) {
	n = resolve(n)
	if n.Kind == yaml.SequenceNode {
		return n.Content, true, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, false, nil
	}
	var kind, list *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "kind":
			kind = resolve(n.Content[i+1])
		case "items":
			list = resolve(n.Content[i+1])
		}
	}
	if kind == nil || kind.Kind != yaml.ScalarNode || kind.Value != "List" {
		return nil, false, nil
	}
	if list == nil || list.Kind != yaml.SequenceNode {
		errs.add("items", "a List's items: expected a list of objects")
		return nil, true, errs
	}
	return list.Content, true, nil
}

// decodeObject reads one object's envelope, then its spec and status
// into the kind's types, within d's budget of values.
func decodeObject(n *yaml.Node, d *decoder) (Object, ErrorList) {
	var errs ErrorList
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		errs.add("", "expected an object with apiVersion, kind, metadata and spec, got %s", describe(n))
		return nil, errs
	}
	fields, ferrs := mappingFields(n, "")
	errs.merge(ferrs)
	var kind Kind
	if k, ok := fields["kind"]; ok {
		kind = Kind(scalarText(k))
	}
	o, err := New(kind)
	if err != nil {
		if kind == "" {
			errs.add("kind", "missing: expected one of %s", kindList())
		} else {
			hint := ""
			if k, how, ok := KubernetesKind(string(kind)); ok {
				hint = "; " + how
				if k != KindTask {
					hint += " (kind: " + string(k) + ")"
				}
			}
			errs.add("kind", "unknown kind %q: expected one of %s%s", kind, kindList(), hint)
		}
		return nil, errs
	}
	for _, key := range orderedKeys(n) {
		v := fields[key]
		switch key {
		case "apiVersion":
			if s := scalarText(v); s != APIVersion {
				hint := ""
				if s == "v1" || strings.Contains(s, "/") {
					hint = ": Legion's objects are its own, not Kubernetes' (see docs/object-model.md)"
				}
				errs.add("apiVersion", "expected %s, got %q%s", APIVersion, s, hint)
			}
		case "kind":
		case "metadata":
			d.decodeInto(v, reflect.ValueOf(o.GetMetadata()).Elem(), "metadata", &errs)
		case "spec":
			d.decodeInto(v, reflect.ValueOf(o.SpecPtr()).Elem(), "spec", &errs)
		case "status":
			if o.StatusPtr() == nil {
				errs.add("status", "unknown field: %s has no status", kind)
				continue
			}
			d.decodeInto(v, reflect.ValueOf(o.StatusPtr()).Elem(), "status", &errs)
		default:
			if _, ok := structFields(reflect.TypeOf(o.SpecPtr()).Elem())[key]; ok {
				// As a Kubernetes Secret or ConfigMap has its data.
				errs.add(key, "unknown field: a %s's %s goes under spec (spec.%s)", kind, key, key)
				continue
			}
			errs.add(key, "unknown field")
		}
	}
	if _, ok := fields["apiVersion"]; !ok {
		errs.add("apiVersion", "missing: expected %s", APIVersion)
	}
	if _, ok := fields["metadata"]; !ok {
		errs.add("metadata", "missing")
	}
	return o, errs
}

// maxNodes bounds the values one document may expand to, so aliases of
// aliases cannot make decoding exponential.
const maxNodes = 200_000

type decoder struct {
	budget int
	fields map[reflect.Type]map[string][]int // struct field indexes, per document
}

func (d *decoder) structFields(t reflect.Type) map[string][]int {
	if f, ok := d.fields[t]; ok {
		return f
	}
	if d.fields == nil {
		d.fields = map[reflect.Type]map[string][]int{}
	}
	f := structFields(t)
	d.fields[t] = f
	return f
}

// scalarDecoder is a type written as one scalar in a canonical form
// (quantities, durations, port references).
type scalarDecoder interface{ decodeScalar(string) error }

var scalarDecoderType = reflect.TypeFor[scalarDecoder]()

var timeType = reflect.TypeFor[time.Time]()

// decodeInto fills v from n, strictly, adding errors under path.
func (d *decoder) decodeInto(n *yaml.Node, v reflect.Value, path string, errs *ErrorList) {
	n = resolve(n)
	if d.budget--; d.budget == 0 {
		errs.add(path, "document too large: aliases expand past %d values", maxNodes)
	}
	if d.budget <= 0 {
		return
	}
	if isNull(n) {
		v.Set(reflect.Zero(v.Type()))
		return
	}
	if v.CanAddr() && v.Addr().Type().Implements(scalarDecoderType) {
		if n.Kind != yaml.ScalarNode {
			errs.add(path, "expected a single value, got %s", describe(n))
			return
		}
		if err := v.Addr().Interface().(scalarDecoder).decodeScalar(n.Value); err != nil {
			errs.add(path, "%v", err)
		}
		return
	}
	if v.Type() == timeType {
		t, err := time.Parse(time.RFC3339Nano, n.Value)
		if n.Kind != yaml.ScalarNode || err != nil {
			errs.add(path, "expected a time as RFC 3339 gives it (2026-12-05T07:00:00Z), got %s", describe(n))
			return
		}
		v.Set(reflect.ValueOf(t))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decodeInto(n, p.Elem(), path, errs)
		v.Set(p)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			errs.add(path, "expected an object, got %s", describe(n))
			return
		}
		fields := d.structFields(v.Type())
		kv, ferrs := mappingFields(n, path)
		errs.merge(ferrs)
		for _, key := range orderedKeys(n) {
			idx, ok := fields[key]
			if !ok {
				errs.add(field(path, key), "unknown field%s", kubernetesFieldHint(field(path, key)))
				continue
			}
			d.decodeInto(kv[key], v.FieldByIndex(idx), field(path, key), errs)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // []byte: base64 text
			if n.Kind != yaml.ScalarNode {
				errs.add(path, "expected base64 text, got %s", describe(n))
				return
			}
			b, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(n.Value), ""))
			if err != nil {
				errs.add(path, "expected base64 text: %v", err)
				return
			}
			v.SetBytes(b)
			return
		}
		if n.Kind != yaml.SequenceNode {
			errs.add(path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			d.decodeInto(item, s.Index(i), index(path, i), errs)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			errs.add(path, "expected a mapping, got %s", describe(n))
			return
		}
		kv, ferrs := mappingFields(n, path)
		errs.merge(ferrs)
		m := reflect.MakeMapWithSize(v.Type(), len(kv))
		for _, key := range orderedKeys(n) {
			e := reflect.New(v.Type().Elem()).Elem()
			d.decodeInto(kv[key], e, field(path, key), errs)
			m.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			errs.add(path, "expected a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := strconv.ParseBool(n.Value)
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || err != nil {
			errs.add(path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int64, reflect.Int32:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!str") {
			errs.add(path, "expected a whole number, got %s", describe(n))
			return
		}
		i, err := strconv.ParseInt(strings.ReplaceAll(n.Value, "_", ""), 0, 64)
		if err != nil || v.OverflowInt(i) {
			errs.add(path, "expected a whole number, got %q", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		u, err := strconv.ParseUint(n.Value, 10, 64)
		if n.Kind != yaml.ScalarNode || err != nil || v.OverflowUint(u) {
			errs.add(path, "expected a non-negative whole number, got %s", describe(n))
			return
		}
		v.SetUint(u)
	default:
		errs.add(path, "cannot be set from a manifest")
	}
}

// structFields maps each JSON field name of a struct type to its index,
// descending into embedded structs as encoding/json does.
func structFields(t reflect.Type) map[string][]int {
	out := make(map[string][]int, t.NumField())
	var walk func(t reflect.Type, prefix []int)
	walk = func(t reflect.Type, prefix []int) {
		for i := range t.NumField() {
			f := t.Field(i)
			idx := append(append([]int(nil), prefix...), i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if tag == "-" || !f.IsExported() {
				continue
			}
			if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if name == "" {
				name = f.Name
			}
			out[name] = idx
		}
	}
	walk(t, nil)
	return out
}

// mappingFields returns a mapping's keys and values, expanding YAML merge
// keys (<<) beneath explicit keys and reporting duplicate keys.
func mappingFields(n *yaml.Node, path string) (map[string]*yaml.Node, ErrorList) {
	return mergeFields(n, path, map[*yaml.Node]bool{})
}

// mergeFields does mappingFields' work, refusing a mapping that merges
// itself, through however many aliases.
func mergeFields(n *yaml.Node, path string, visiting map[*yaml.Node]bool) (map[string]*yaml.Node, ErrorList) {
	var errs ErrorList
	if visiting[n] {
		errs.add(path, "a merge key (<<) includes the mapping it is in")
		return map[string]*yaml.Node{}, errs
	}
	visiting[n] = true
	defer delete(visiting, n)
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	var merged []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := resolve(n.Content[i]), n.Content[i+1]
		if k.Tag == "!!merge" {
			merged = append(merged, v)
			continue
		}
		if k.Kind != yaml.ScalarNode {
			errs.add(path, "keys must be plain strings, got %s", describe(k))
			continue
		}
		if _, dup := out[k.Value]; dup {
			errs.add(field(path, k.Value), "given twice")
			continue
		}
		out[k.Value] = v
	}
	for _, m := range merged {
		m = resolve(m)
		sources := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			sources = m.Content
		}
		for _, src := range sources {
			src = resolve(src)
			if src.Kind != yaml.MappingNode {
				errs.add(path, "a merge key (<<) must name a mapping, got %s", describe(src))
				continue
			}
			sub, serrs := mergeFields(src, path, visiting)
			errs.merge(serrs)
			for k, v := range sub {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
		}
	}
	return out, errs
}

// orderedKeys lists a mapping's keys in document order, merged keys after
// the explicit ones, each once.
func orderedKeys(n *yaml.Node) []string {
	var keys []string
	seen := map[string]bool{}
	visiting := map[*yaml.Node]bool{}
	var visit func(n *yaml.Node)
	visit = func(n *yaml.Node) {
		if visiting[n] {
			return
		}
		visiting[n] = true
		defer delete(visiting, n)
		var merged []*yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := resolve(n.Content[i])
			if k.Tag == "!!merge" {
				merged = append(merged, resolve(n.Content[i+1]))
				continue
			}
			if k.Kind == yaml.ScalarNode && !seen[k.Value] {
				seen[k.Value] = true
				keys = append(keys, k.Value)
			}
		}
		for _, m := range merged {
			if m.Kind == yaml.SequenceNode {
				for _, s := range m.Content {
					if s = resolve(s); s.Kind == yaml.MappingNode {
						visit(s)
					}
				}
			} else if m.Kind == yaml.MappingNode {
				visit(m)
			}
		}
	}
	visit(n)
	return keys
}

// resolve follows aliases, bounded so a cycle cannot loop forever.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

func scalarText(n *yaml.Node) string {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return fmt.Sprintf("%q", v)
	}
	return "an unsupported YAML node"
}
