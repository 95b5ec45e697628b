package endpoints

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Policy members and endpoint tasks in the protobuf wire format of the
// dispatcher's PolicyMember and EndpointTask messages
// (internal/proto/dispatcher.proto), the typed values an agent asks for
// (AssignmentsRequest.typed_values). The manager encodes each changed one
// once for every node, and every node decodes each: at 20,000 tasks and
// 256 nodes that is millions of decodings in a rollout, the largest part
// of an agent's work. They are read straight from the wire format, every
// string of a value sharing one allocation; JSON took six times as long,
// and the generated message's decoder three, once its allocations were
// counted. Written here, beside the types, so the proto package need not
// know them.

// Field numbers of PolicyMember and EndpointTask.
const (
	memberNamespace, memberService, memberTask, memberIP, memberNode protowire.Number = 1, 2, 3, 4, 5
	taskName, taskIP, taskNode, taskSlot                             protowire.Number = 1, 2, 3, 4
)

// MemberWire is m as a PolicyMember in the wire format.
func MemberWire(m *Member) []byte {
	b := make([]byte, 0, 16+len(m.Namespace)+len(m.Service)+len(m.Task)+len(m.IP)+len(m.Node))
	b = appendString(b, memberNamespace, m.Namespace)
	b = appendString(b, memberService, m.Service)
	b = appendString(b, memberTask, m.Task)
	b = appendString(b, memberIP, m.IP)
	return appendString(b, memberNode, m.Node)
}

// MemberFromWire decodes a PolicyMember.
func MemberFromWire(data []byte) (*Member, error) {
	m := &Member{}
	err := readWire(data, func(num protowire.Number, typ protowire.Type, s string, _ uint64) {
		if typ != protowire.BytesType {
			return // not this message's field: proto.Unmarshal keeps it aside, it is dropped here
		}
		switch num {
		case memberNamespace:
			m.Namespace = s
		case memberService:
			m.Service = s
		case memberTask:
			m.Task = s
		case memberIP:
			m.IP = s
		case memberNode:
			m.Node = s
		}
	})
	if err != nil {
		return nil, fmt.Errorf("policy member: %w", err)
	}
	return m, nil
}

// TaskWire is t as an EndpointTask in the wire format.
func TaskWire(t Task) []byte {
	b := make([]byte, 0, 16+len(t.Name)+len(t.IP)+len(t.Node))
	b = appendString(b, taskName, t.Name)
	b = appendString(b, taskIP, t.IP)
	b = appendString(b, taskNode, t.Node)
	if t.Slot != 0 {
		b = protowire.AppendTag(b, taskSlot, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(int64(t.Slot)))
	}
	return b
}

// TaskFromWire decodes an EndpointTask.
func TaskFromWire(data []byte) (Task, error) {
	var t Task
	err := readWire(data, func(num protowire.Number, typ protowire.Type, s string, v uint64) {
		switch {
		case num == taskSlot && typ == protowire.VarintType:
			t.Slot = int(int64(v))
		case typ != protowire.BytesType:
		case num == taskName:
			t.Name = s
		case num == taskIP:
			t.IP = s
		case num == taskNode:
			t.Node = s
		}
	})
	if err != nil {
		return Task{}, fmt.Errorf("endpoint task: %w", err)
	}
	return t, nil
}

// appendString appends a string field, leaving out an empty one as
// proto3 does.
func appendString(b []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// readWire calls field for each length-delimited field (s, a slice of one
// copy of data) and varint field (v) of a message in the wire format;
// fields of other types are skipped, as a decoder of a newer message's
// fields would.
func readWire(data []byte, field func(num protowire.Number, typ protowire.Type, s string, v uint64)) error {
	all := string(data)
	for off := 0; off < len(data); {
		num, typ, n := protowire.ConsumeTag(data[off:])
		if n < 0 {
			return protowire.ParseError(n)
		}
		off += n
		switch typ {
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(data[off:])
			if n < 0 {
				return protowire.ParseError(n)
			}
			start := off + n - len(v)
			field(num, typ, all[start:start+len(v)], 0)
			off += n
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(data[off:])
			if n < 0 {
				return protowire.ParseError(n)
			}
			field(num, typ, "", v)
			off += n
		default:
			n := protowire.ConsumeFieldValue(num, typ, data[off:])
			if n < 0 {
				return protowire.ParseError(n)
			}
			off += n
		}
	}
	return nil
}
