// Package jsonfast decodes JSON as encoding/json does, in about a third of
// the time, on the paths that every write and every assignment crosses: a
// replica's state machine, the Raft transport, the API's object envelope
// and an agent's assignments. It goes through the v1 emulation of the
// encoding/json/v2 prototype (github.com/go-json-experiment/json/v1),
// which keeps encoding/json's rules: names matched without regard to case,
// the last of duplicate names kept, invalid UTF-8 let through,
// UnmarshalJSON methods called, and errors that name the field and type
// as its do.
//
// Only decoding comes from there: encoding/json encodes as fast. Input
// that a person typed (manifests, flags) stays with encoding/json, whose
// strict decoder admission relies on. When Go's own encoding/json/v2 is no
// longer an experiment, this file is the one place to change.
package jsonfast

import jsonv1 "github.com/go-json-experiment/json/v1"

// Unmarshal decodes data into v as encoding/json.Unmarshal does.
func Unmarshal(data []byte, v any) error { return jsonv1.Unmarshal(data, v) }
