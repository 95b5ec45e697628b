package compose

import (
	"encoding/json"
	"fmt"

	"github.com/legionbsd/legion"
)

// mergeExtension merges an x-legion value into an object's spec, then
// reads the object back as strictly as a manifest, so a misspelt field in
// x-legion is an error naming it.
//
// Merging: mappings key by key; lists whose entries all have a name
// (containers, volumes, env, ports) entry by entry by name, new names
// appended; other lists and scalars replaced; null removes. A probe given
// with another sort (http for the healthcheck's exec) replaces the sort.
func mergeExtension(o legion.Object, ext any) (legion.Object, error) {
	if _, ok := ext.(map[string]any); !ok {
		return nil, fmt.Errorf("expected a mapping merged into the generated spec, got %s", describe(ext))
	}
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	doc["spec"] = mergeValue(doc["spec"], ext)
	merged, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding the merged spec: %w", err)
	}
	docs, err := legion.Decode(merged)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 || docs[0].Object == nil {
		return nil, fmt.Errorf("the merged spec does not read as a %s", o.GetKind())
	}
	if len(docs[0].Errs) > 0 {
		return nil, docs[0].Errs
	}
	return docs[0].Object, nil
}

func mergeValue(base, over any) any {
	switch o := over.(type) {
	case map[string]any:
		b, ok := base.(map[string]any)
		if !ok {
			return o
		}
		out := make(map[string]any, len(b)+len(o))
		for k, v := range b {
			out[k] = v
		}
		// A probe is exactly one of its sorts: naming a sort replaces the
		// generated one (x-legion's readiness overrides the healthcheck's).
		if sortOf(o) != "" && sortOf(b) != "" && sortOf(o) != sortOf(b) {
			delete(out, sortOf(b))
		}
		for k, v := range o {
			if v == nil {
				delete(out, k)
				continue
			}
			out[k] = mergeValue(out[k], v)
		}
		return out
	case []any:
		b, ok := base.([]any)
		if !ok || !named(b) || !named(o) {
			return o
		}
		out := make([]any, len(b), len(b)+len(o))
		copy(out, b)
		at := map[string]int{}
		for i, e := range b {
			at[e.(map[string]any)["name"].(string)] = i
		}
		for _, e := range o {
			name := e.(map[string]any)["name"].(string)
			if i, ok := at[name]; ok {
				out[i] = mergeValue(out[i], e)
				continue
			}
			at[name] = len(out)
			out = append(out, e)
		}
		return out
	}
	return over
}

// probeSorts are the keys of which a probe has exactly one.
var probeSorts = []string{"exec", "http", "tcp", "grpc"}

func sortOf(m map[string]any) string {
	for _, k := range probeSorts {
		if v, ok := m[k]; ok && v != nil {
			return k
		}
	}
	return ""
}

// named reports whether every entry of a list is a mapping with a name.
func named(list []any) bool {
	for _, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		if _, ok := m["name"].(string); !ok {
			return false
		}
	}
	return true
}

func describe(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case nil:
		return "nothing"
	case string:
		return "a string"
	}
	return fmt.Sprintf("%T", v)
}
