package appendstream

import (
	"fmt"
	"unicode/utf8"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// The process's gRPC "proto" codec is replaced, on import of this package,
// by one that encodes with the vtprotobuf code generated for agentstate's
// messages (messages/*/v1/*_vtproto.pb.go: straight-line code instead of
// the reflection-driven encoder, which took a sixth of the CPU of an append
// over gRPC) and decodes with it the two messages of AppendBatches. Every
// other message, and anything without generated code (health, reflection,
// Proto.Actor's remote), goes through grpc's own codec as before.
//
// Decoding is limited to those two because the generated decoder does not
// check that strings are UTF-8, which proto3 requires and grpc's codec
// enforces; checkUTF8 does it for them, field by field, so the wire
// contract is unchanged: a message with an invalid string is refused.
func init() {
	encoding.RegisterCodecV2(codec{fallback: encoding.GetCodecV2(proto.Name)})
}

type codec struct{ fallback encoding.CodecV2 }

type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

func (codec) Name() string { return proto.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(vtMessage)
	if !ok {
		return c.fallback.Marshal(v)
	}
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBufferVT(buf); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT(*buf); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *sessionv1.AppendBatch:
		return unmarshalChecked(data, m.UnmarshalVT, func() error { return checkBatch(m) })
	case *sessionv1.AppendOutcomes:
		return unmarshalChecked(data, m.UnmarshalVT, func() error { return checkOutcomes(m) })
	}
	return c.fallback.Unmarshal(data, v)
}

// unmarshalChecked decodes data (the generated decoder copies the strings
// it keeps, so the buffer goes back to the pool at once) and checks it.
func unmarshalChecked(data mem.BufferSlice, unmarshal func([]byte) error, check func() error) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	if err := unmarshal(buf.ReadOnlyData()); err != nil {
		return err
	}
	return check()
}

var errNotUTF8 = fmt.Errorf("proto: string field contains invalid UTF-8")

func checkStrings(ss ...string) error {
	for _, s := range ss {
		if !utf8.ValidString(s) {
			return errNotUTF8
		}
	}
	return nil
}

func checkBatch(b *sessionv1.AppendBatch) error {
	for _, a := range b.GetAppends() {
		r := a.GetRequest()
		if err := checkStrings(r.GetSessionId()); err != nil {
			return err
		}
		for _, m := range r.GetMessages() {
			if err := checkStrings(m.GetContent(), m.GetMetadataJson(), m.GetMessageId()); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkOutcomes(o *sessionv1.AppendOutcomes) error {
	for _, t := range o.GetOutcomes() {
		if e := t.GetOutcome().GetError(); e != nil {
			if err := checkStrings(e.GetMessage()); err != nil {
				return err
			}
		}
		for _, m := range t.GetOutcome().GetResponse().GetMessages() {
			if err := checkStrings(m.GetMessageId()); err != nil {
				return err
			}
		}
	}
	return nil
}
