package legionpb

import (
	"encoding/json"
	"fmt"

	"github.com/legionbsd/legion"
)

// ToProto puts an object in the wire envelope: spec and status as JSON.
func ToProto(o legion.Object) (*Object, error) {
	out := HeaderOf(o)
	var err error
	if p := o.SpecPtr(); p != nil {
		if out.Spec, err = json.Marshal(p); err != nil {
			return nil, fmt.Errorf("encoding %s spec: %w", o.GetKind(), err)
		}
	}
	if p := o.StatusPtr(); p != nil {
		if out.Status, err = json.Marshal(p); err != nil {
			return nil, fmt.Errorf("encoding %s status: %w", o.GetKind(), err)
		}
	}
	return out, nil
}

// HeaderOf is the envelope of an object without its spec and status: its
// kind and metadata.
func HeaderOf(o legion.Object) *Object {
	m := o.GetMetadata()
	return &Object{
		ApiVersion: legion.APIVersion,
		Kind:       string(o.GetKind()),
		Metadata: &Metadata{Name: m.Name, Namespace: m.Namespace, Labels: m.Labels,
			Uid: m.UID, Version: m.Version, Generation: m.Generation},
	}
}

// FromProto reads an object from the wire envelope.
func FromProto(p *Object) (legion.Object, error) {
	if p == nil {
		return nil, fmt.Errorf("object: missing")
	}
	var m legion.Metadata
	if pm := p.GetMetadata(); pm != nil {
		m = legion.Metadata{Name: pm.Name, Namespace: pm.Namespace, Labels: pm.Labels,
			UID: pm.Uid, Version: pm.Version, Generation: pm.Generation}
	}
	return legion.Assemble(legion.Kind(p.Kind), m, p.Spec, p.Status)
}
