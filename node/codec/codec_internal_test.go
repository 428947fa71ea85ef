package codec

import (
	"testing"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func checkedCodec(t *testing.T) encoding.CodecV2 {
	t.Helper()
	c := Codec()
	if _, ok := c.(codec); !ok || c.Name() != "proto" {
		t.Fatalf("Codec() is %T named %q, want this package's, named proto", c, c.Name())
	}
	if _, ok := encoding.GetCodecV2("proto").(codec); ok {
		t.Fatal("importing the package replaced the process's proto codec")
	}
	return c
}

func TestCodecRoundTrips(t *testing.T) {
	c := checkedCodec(t)
	batch := &sessionv1.AppendBatch{Appends: []*sessionv1.TaggedAppend{
		{Tag: 1, Request: &sessionv1.AppendRequest{SessionId: "s", Messages: []*sessionv1.NewMessage{
			{Role: sessionv1.Role_ROLE_USER, Content: "héllo", MetadataJson: `{"k":1}`, MessageId: "01J00000000000000000000000"}}}},
		{Tag: 1 << 40},
	}}
	outcomes := &sessionv1.AppendOutcomes{Outcomes: []*sessionv1.TaggedOutcome{
		{Tag: 7, Outcome: &sessionv1.AppendStreamResponse{Outcome: &sessionv1.AppendStreamResponse_Response{
			Response: &sessionv1.AppendResponse{Duplicate: true, Messages: []*sessionv1.AppendedMessage{
				{MessageId: "m", Sequence: 42, CreatedAt: timestamppb.Now()}}}}}},
		{Tag: 8, Outcome: &sessionv1.AppendStreamResponse{Outcome: &sessionv1.AppendStreamResponse_Error{
			Error: &commonv1.Error{Code: commonv1.ErrorCode_ERROR_CODE_NOT_FOUND, Message: "no session"}}}},
	}}
	for _, in := range []proto.Message{batch, outcomes, &sessionv1.CreateSessionRequest{ActorName: "a"}} {
		data, err := c.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		out := in.ProtoReflect().New().Interface()
		if err := c.Unmarshal(data, out); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(in, out) {
			t.Fatalf("round trip of %T changed it:\n%v\n%v", in, in, out)
		}
	}
}

// Every string field reachable from the two messages the codec decodes
// itself must be checked: set each alone to invalid UTF-8 (encoded by the
// generated code, which does not check) and expect the decode to fail. A
// string field added to the contract later fails here until checkBatch or
// checkOutcomes covers it.
func TestCodecRefusesInvalidUTF8InEveryStringField(t *testing.T) {
	c := checkedCodec(t)
	for _, root := range []interface {
		proto.Message
		MarshalVT() ([]byte, error)
	}{&sessionv1.AppendBatch{}, &sessionv1.AppendOutcomes{}} {
		paths := stringPaths(root.ProtoReflect().Descriptor(), nil, map[protoreflect.FullName]bool{})
		if len(paths) == 0 {
			t.Fatalf("%T: no string fields found", root)
		}
		for _, path := range paths {
			m := root.ProtoReflect().New()
			setPath(m, path, "\xff")
			wire, err := m.Interface().(interface{ MarshalVT() ([]byte, error) }).MarshalVT()
			if err != nil {
				t.Fatal(err)
			}
			out := root.ProtoReflect().New().Interface()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, out); err == nil {
				t.Errorf("%T: invalid UTF-8 in %s was accepted", root, names(path))
			}
		}
	}
}

// stringPaths lists the field paths from d to every string field below it.
func stringPaths(d protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor, seen map[protoreflect.FullName]bool) [][]protoreflect.FieldDescriptor {
	if seen[d.FullName()] {
		return nil
	}
	seen[d.FullName()] = true
	defer delete(seen, d.FullName())
	var out [][]protoreflect.FieldDescriptor
	fields := d.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		path := append(append([]protoreflect.FieldDescriptor{}, prefix...), fd)
		switch fd.Kind() {
		case protoreflect.StringKind:
			out = append(out, path)
		case protoreflect.MessageKind:
			out = append(out, stringPaths(fd.Message(), path, seen)...)
		}
	}
	return out
}

func setPath(m protoreflect.Message, path []protoreflect.FieldDescriptor, s string) {
	fd := path[0]
	if len(path) == 1 {
		if fd.IsList() {
			m.Mutable(fd).List().Append(protoreflect.ValueOfString(s))
		} else {
			m.Set(fd, protoreflect.ValueOfString(s))
		}
		return
	}
	if fd.IsMap() {
		setMapPath(m.Mutable(fd).Map(), path[1:], s)
		return
	}
	var child protoreflect.Message
	if fd.IsList() {
		child = m.Mutable(fd).List().AppendMutable().Message()
	} else {
		child = m.Mutable(fd).Message()
	}
	setPath(child, path[1:], s)
}

// setMapPath puts one entry into mp whose key (path[0] is the entry's key
// field) or value (path[0] is its value field, or a string below it) is s.
func setMapPath(mp protoreflect.Map, path []protoreflect.FieldDescriptor, s string) {
	fd := path[0]
	if fd.Number() == 1 { // the entry's key
		mp.Set(protoreflect.ValueOfString(s).MapKey(), mp.NewValue())
		return
	}
	key := protoreflect.ValueOfString("k").MapKey()
	if len(path) == 1 {
		mp.Set(key, protoreflect.ValueOfString(s))
		return
	}
	v := mp.NewValue()
	setPath(v.Message(), path[1:], s)
	mp.Set(key, v)
}

func names(path []protoreflect.FieldDescriptor) string {
	s := ""
	for i, fd := range path {
		if i > 0 {
			s += "."
		}
		s += string(fd.Name())
	}
	return s
}

// TestMarshalBufferFitsTheMessage: a message between gRPC's pool tiers
// (32 KiB and 1 MiB) is encoded into a buffer at most twice its size, not
// into a 1 MiB one (issue 15: each blocked outcome message held 1 MiB).
func TestMarshalBufferFitsTheMessage(t *testing.T) {
	c := checkedCodec(t)
	for _, size := range []int{40 << 10, 64 << 10, 300 << 10} {
		out := &sessionv1.AppendOutcomes{}
		for i := 0; i%256 != 0 || out.SizeVT() < size; i++ {
			out.Outcomes = append(out.Outcomes, &sessionv1.TaggedOutcome{Tag: uint64(i), Outcome: &sessionv1.AppendStreamResponse{
				Outcome: &sessionv1.AppendStreamResponse_Response{Response: &sessionv1.AppendResponse{
					Messages: []*sessionv1.AppendedMessage{{MessageId: "01J00000000000000000000000"}}}}}})
		}
		data, err := c.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) != 1 {
			t.Fatalf("%d bytes encoded into %d buffers, want one", out.SizeVT(), len(data))
		}
		b := data[0].ReadOnlyData()
		if cap(b) > 2*len(b) {
			t.Fatalf("a message of %d bytes was encoded into a buffer of %d", len(b), cap(b))
		}
		data.Free()
	}
}
