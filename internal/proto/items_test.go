package legionpb

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// oldItems is Items as it was, put a map<string, bytes>, built at run
// time: what managers and agents from before encode and decode.
func oldItems(t *testing.T) protoreflect.MessageDescriptor {
	t.Helper()
	s := proto.String
	label, repeated := descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL, descriptorpb.FieldDescriptorProto_LABEL_REPEATED
	str, byt, msg := descriptorpb.FieldDescriptorProto_TYPE_STRING, descriptorpb.FieldDescriptorProto_TYPE_BYTES, descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	fd := &descriptorpb.FileDescriptorProto{
		Name: s("old_items.proto"), Package: s("old"), Syntax: s("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{
			Name: s("Items"),
			Field: []*descriptorpb.FieldDescriptorProto{
				{Name: s("put"), Number: proto.Int32(1), Label: &repeated, Type: &msg, TypeName: s(".old.Items.PutEntry"), JsonName: s("put")},
				{Name: s("removed"), Number: proto.Int32(2), Label: &repeated, Type: &str, JsonName: s("removed")},
			},
			NestedType: []*descriptorpb.DescriptorProto{{
				Name: s("PutEntry"),
				Field: []*descriptorpb.FieldDescriptorProto{
					{Name: s("key"), Number: proto.Int32(1), Label: &label, Type: &str, JsonName: s("key")},
					{Name: s("value"), Number: proto.Int32(2), Label: &label, Type: &byt, JsonName: s("value")},
				},
				Options: &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)},
			}},
		}},
	}
	f, err := protodesc.NewFile(fd, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f.Messages().Get(0)
}

// Items.put was a map<string, bytes>. On the wire a map's entries are
// messages of a key (1) and a value (2), as Item is, so each side reads
// what the other writes.
func TestItemsPutIsAMapOnTheWire(t *testing.T) {
	desc := oldItems(t)
	if !desc.Fields().ByName("put").IsMap() {
		t.Fatal("the old form's put is not a map")
	}
	put := map[string][]byte{"web\x00a": []byte(`{"x":1}`), "web\x00b": nil, "": []byte("v")}

	// New to old.
	data, err := proto.Marshal(&Items{Put: ItemsPut(put), Removed: []string{"gone"}})
	if err != nil {
		t.Fatal(err)
	}
	old := dynamicpb.NewMessage(desc)
	if err := proto.Unmarshal(data, old); err != nil {
		t.Fatal(err)
	}
	m := old.Get(desc.Fields().ByName("put")).Map()
	if m.Len() != len(put) {
		t.Fatalf("read as the old map: %d entries, want %d", m.Len(), len(put))
	}
	for k, v := range put {
		if got := m.Get(protoreflect.ValueOfString(k).MapKey()).Bytes(); string(got) != string(v) {
			t.Fatalf("read as the old map: %q is %q, want %q", k, got, v)
		}
	}

	// Old to new.
	old = dynamicpb.NewMessage(desc)
	om := old.Mutable(desc.Fields().ByName("put")).Map()
	for k, v := range put {
		om.Set(protoreflect.ValueOfString(k).MapKey(), protoreflect.ValueOfBytes(v))
	}
	if data, err = proto.Marshal(old); err != nil {
		t.Fatal(err)
	}
	var back Items
	if err := proto.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	got := back.PutMap()
	if len(got) != len(put) || len(back.GetPut()) != len(put) {
		t.Fatalf("the old map read as a list: %d entries, want %d", len(back.GetPut()), len(put))
	}
	for k, v := range put {
		if string(got[k]) != string(v) {
			t.Fatalf("the old map read as a list: %q is %q, want %q", k, got[k], v)
		}
	}
	// Sorted, one per key.
	sorted := ItemsPut(map[string][]byte{"b": nil, "a": nil, "c": nil})
	if sorted[0].Key != "a" || sorted[1].Key != "b" || sorted[2].Key != "c" {
		t.Fatalf("ItemsPut: %v, want a b c", sorted)
	}
}
