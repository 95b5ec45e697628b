package legionpb

import (
	"fmt"

	"github.com/legionbsd/legion/internal/endpoints"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The typed values of an assignment set's member and endpoint task
// changes (AssignmentsRequest.typed_values). The manager encodes each
// once for every node, and every node decodes each: at 20,000 tasks and
// 256 nodes that is millions of decodings in a rollout, the largest part
// of an agent's work. They are read straight from the wire format
// (protowire), every string of a value sharing one allocation: the
// generated message's decoder took as long as JSON's once its seven
// allocations were counted.

// MemberValue is m in the wire format of a PolicyMember.
func MemberValue(m *endpoints.Member) ([]byte, error) {
	return proto.Marshal(&PolicyMember{Namespace: m.Namespace, Service: m.Service, Task: m.Task, Ip: m.IP, Node: m.Node})
}

// MemberOfValue decodes a PolicyMember.
func MemberOfValue(data []byte) (*endpoints.Member, error) {
	m := &endpoints.Member{}
	err := readValue(data, func(num protowire.Number, typ protowire.Type, s string, _ uint64) {
		if typ != protowire.BytesType {
			return // not this message's: kept aside by proto.Unmarshal, dropped here
		}
		switch num {
		case 1:
			m.Namespace = s
		case 2:
			m.Service = s
		case 3:
			m.Task = s
		case 4:
			m.IP = s
		case 5:
			m.Node = s
		}
	})
	if err != nil {
		return nil, fmt.Errorf("policy member: %w", err)
	}
	return m, nil
}

// EndpointTaskValue is t in the wire format of an EndpointTask.
func EndpointTaskValue(t endpoints.Task) ([]byte, error) {
	return proto.Marshal(&EndpointTask{Name: t.Name, Ip: t.IP, Node: t.Node, Slot: int64(t.Slot)})
}

// EndpointTaskOfValue decodes an EndpointTask.
func EndpointTaskOfValue(data []byte) (endpoints.Task, error) {
	var t endpoints.Task
	err := readValue(data, func(num protowire.Number, typ protowire.Type, s string, v uint64) {
		switch {
		case num == 4 && typ == protowire.VarintType:
			t.Slot = int(int64(v))
		case typ != protowire.BytesType:
		case num == 1:
			t.Name = s
		case num == 2:
			t.IP = s
		case num == 3:
			t.Node = s
		}
	})
	if err != nil {
		return endpoints.Task{}, fmt.Errorf("endpoint task: %w", err)
	}
	return t, nil
}

// readValue calls field for each length-delimited field (s, a slice of
// one copy of data) and varint field (v) of a message in the wire
// format; fields of other types are skipped, as a decoder of a newer
// message's fields would.
func readValue(data []byte, field func(num protowire.Number, typ protowire.Type, s string, v uint64)) error {
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
