package main

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/legionbsd/legion"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/selection"
)

// fieldUsage is --field-selector's help, of get, watch and delete alike.
const fieldUsage = "only objects whose fields match, as kubectl's: a field by its path in the object's YAML, = or !=, comma-separated (spec.node=n1,status.state!=running)"

// fieldTerm is one term of --field-selector: a field by its dotted path
// in the object as its YAML writes it, equal (or not) to a value.
type fieldTerm struct {
	path  []string
	not   bool
	value string
}

// parseFieldSelector reads --field-selector in kubectl's syntax (read by
// apimachinery's fields package): path=value, path==value, path!=value.
func parseFieldSelector(exprs []string) ([]fieldTerm, error) {
	if len(exprs) == 0 {
		return nil, nil
	}
	text := strings.Join(exprs, ",")
	sel, err := fields.ParseSelector(text)
	if err != nil {
		return nil, fmt.Errorf("--field-selector %s: %w", text, err)
	}
	var out []fieldTerm
	for _, r := range sel.Requirements() {
		if r.Field == "" {
			return nil, fmt.Errorf("--field-selector %s: a term names no field", text)
		}
		out = append(out, fieldTerm{path: strings.Split(r.Field, "."), not: r.Operator == selection.NotEquals, value: r.Value})
	}
	return out, nil
}

// checkFieldTerms refuses a path that names no single value of kind's
// objects: a field it does not have, a list, or an object.
func checkFieldTerms(terms []fieldTerm, kinds ...legion.Kind) error {
	for _, kind := range kinds {
		o, err := legion.New(kind)
		if err != nil {
			return err
		}
		for _, t := range terms {
			if err := fieldPathOf(reflect.TypeOf(o), t.path); err != nil {
				return fmt.Errorf("--field-selector %s: %s: %w", strings.Join(t.path, "."), kind, err)
			}
		}
	}
	return nil
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	timeType      = reflect.TypeFor[time.Time]()
)

// oneValue: a type whose JSON is one value (a string, a number, a time,
// a quantity), not an object or a list.
func oneValue(t reflect.Type) bool {
	if t == timeType || t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array, reflect.Interface:
		return false
	}
	return true
}

// fieldPathOf walks path through t by the fields' JSON names (a map takes
// any key, as metadata.labels.app); it must end at one value.
func fieldPathOf(t reflect.Type, path []string) error {
	for i, seg := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		at := strings.Join(path[:i], ".")
		switch {
		case oneValue(t):
			return fmt.Errorf("%s is one value, with no field %s", at, seg)
		case t.Kind() == reflect.Map:
			t = t.Elem()
		case t.Kind() == reflect.Struct:
			f, ok := jsonField(t, seg)
			if !ok {
				if at == "" {
					return fmt.Errorf("no field %s", seg)
				}
				return fmt.Errorf("%s has no field %s", at, seg)
			}
			t = f
		default:
			return fmt.Errorf("%s is a list: a field selector compares one value", at)
		}
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Slice || t.Kind() == reflect.Array:
		return fmt.Errorf("%s is a list: a field selector compares one value", strings.Join(path, "."))
	case !oneValue(t):
		return fmt.Errorf("%s is not one value: name a field in it", strings.Join(path, "."))
	}
	return nil
}

// jsonField is the type of struct t's field that JSON names name, inline
// (embedded) structs' fields included.
func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if f.Anonymous && tag == "" {
			if ft, ok := jsonField(f.Type, name); ok {
				return ft, true
			}
			continue
		}
		if tag == "" {
			tag = f.Name
		}
		if tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

// matchFields reports whether o's fields hold every term: a field the
// object leaves out (empty) compares as "".
func matchFields(o legion.Object, terms []fieldTerm) bool {
	if len(terms) == 0 {
		return true
	}
	b, err := legion.MarshalJSON(o)
	if err != nil {
		return false
	}
	var doc any
	if json.Unmarshal(b, &doc) != nil {
		return false
	}
	for _, t := range terms {
		if (fieldText(doc, t.path) == t.value) == t.not {
			return false
		}
	}
	return true
}

// fieldText is the value at path in a decoded JSON document, as text.
func fieldText(doc any, path []string) string {
	for _, seg := range path {
		m, ok := doc.(map[string]any)
		if !ok {
			return ""
		}
		doc = m[seg]
	}
	switch v := doc.(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}
