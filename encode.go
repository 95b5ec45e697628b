package legion

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// ParseManifest decodes every object of a manifest and runs each through
// admission. It returns the objects that passed, and an error joining an
// *ObjectError for each that did not (nil when all passed). source names
// the manifest in messages.
func ParseManifest(source string, data []byte) ([]Object, error) {
	return ParseManifestIn(source, data, "")
}

// ParseManifestIn is ParseManifest for objects meant for namespace ns (a
// client's -n, as kubectl takes it): an object of a namespaced kind that
// names no namespace goes in ns, and one that names another is refused
// rather than written elsewhere than asked. An empty ns is ParseManifest.
func ParseManifestIn(source string, data []byte, ns string) ([]Object, error) {
	docs, err := Decode(data)
	var all []error
	if err != nil {
		all = append(all, fmt.Errorf("%s: %w", source, err))
	}
	var out []Object
	for _, d := range docs {
		errs := d.Errs
		if d.Object != nil && ns != "" && d.Object.GetKind().Namespaced() {
			switch m := d.Object.GetMetadata(); m.Namespace {
			case "":
				m.Namespace = ns
			case ns:
			default:
				errs.add("metadata.namespace", "%q, while the objects are asked for in namespace %q", m.Namespace, ns)
			}
		}
		if d.Object != nil {
			if aerr := Admit(d.Object); aerr != nil {
				var l ErrorList
				if errors.As(aerr, &l) {
					errs.merge(l)
				}
			}
		}
		if len(errs) > 0 {
			oe := &ObjectError{Source: source, Index: d.Index, Item: d.Item, Errs: errs}
			if d.Object != nil {
				oe.Kind, oe.Name = d.Object.GetKind(), DisplayName(d.Object)
			}
			all = append(all, oe)
			continue
		}
		out = append(out, d.Object)
	}
	return out, errors.Join(all...)
}

// MarshalJSON encodes an object as JSON, fields in the model's order.
func MarshalJSON(o Object) ([]byte, error) { return json.Marshal(o) }

// encodedLen is len(MarshalJSON(o)), counted without keeping the bytes:
// the encoder writes what Marshal returns and a newline, not counted.
func encodedLen(o Object) (int, error) {
	var n byteCount
	if err := json.NewEncoder(&n).Encode(o); err != nil {
		return 0, err
	}
	return int(n) - 1, nil
}

// byteCount is a writer that counts what it is given.
type byteCount int

func (c *byteCount) Write(p []byte) (int, error) {
	*c += byteCount(len(p))
	return len(p), nil
}

// MarshalYAML encodes an object as block-style YAML, fields in the
// model's order, through its JSON form so both say the same.
func MarshalYAML(o Object) ([]byte, error) {
	data, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return JSONToYAML(data)
}

// JSONToYAML re-encodes a JSON document as block-style YAML, keeping the
// order of its keys.
func JSONToYAML(data []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return nil, err
	}
	blockStyle(&n)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style = 0
	}
	if n.Kind == yaml.ScalarNode && n.Style == yaml.DoubleQuotedStyle && n.Tag == "!!str" {
		n.Style = 0 // the encoder quotes again where a plain scalar would read otherwise
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}
