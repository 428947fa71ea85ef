// Package codec is agentstate's gRPC codec: it encodes with the
// vtprotobuf code generated for agentstate's messages
// (messages/*/v1/*_vtproto.pb.go: straight-line code instead of the
// reflection-driven encoder, which took a sixth of the CPU of an append
// over gRPC) and decodes with it the two messages of AppendBatches. Every
// other message, and anything without generated code (health, reflection),
// goes through grpc's own codec.
//
// It registers nothing: importing it changes no process-wide gRPC codec,
// so a program embedding the node keeps its own. A server passes it with
// grpc.ForceServerCodecV2(codec.Codec()), a client connection with
// grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec.Codec())) (the
// client package's DialOptions do).
//
// Decoding is limited to those two messages because the generated decoder
// does not check that strings are UTF-8, which proto3 requires and grpc's
// codec enforces; checkBatch and checkOutcomes do it for them, field by
// field, so the wire contract is unchanged: a message with an invalid
// string is refused.
package codec

import (
	"fmt"
	"sync"
	"unicode/utf8"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protoapi "google.golang.org/protobuf/proto"
)

// theCodec is made on first use, after grpc's own packages registered
// their "proto" codec, which it falls back to.
var theCodec = sync.OnceValue(func() codec { return codec{fallback: encoding.GetCodecV2(proto.Name)} })

// Codec returns the codec, named "proto" like grpc's own, for a server to
// force on every request (grpc.ForceServerCodecV2), whatever content
// subtype the client names (Undecoded works only through it), and for a
// client connection to force on its calls.
func Codec() encoding.CodecV2 { return theCodec() }

type codec struct{ fallback encoding.CodecV2 }

// buffers is the pool the codec encodes into and decodes from: a tier for
// every power of two from 256 bytes to 4 MiB, so that a buffer is at most
// twice the message. gRPC's default pool has no tier between 32 KiB and
// 1 MiB: every AppendBatch and AppendOutcomes of 33 KiB to 1 MiB took a
// 1 MiB buffer, which a stream whose client does not read keeps in the
// transport (issue 15: 40 such streams held 85 MiB of them).
var buffers = sync.OnceValue(func() mem.BufferPool {
	exps := make([]uint8, 0, 15)
	for e := uint8(8); e <= 22; e++ {
		exps = append(exps, e)
	}
	p, err := mem.NewBinaryTieredBufferPool(exps...)
	if err != nil {
		panic(err) // the exponents are constants
	}
	return p
})

type vtMessage interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

func (codec) Name() string { return proto.Name }

func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if t, ok := v.(*Tracked); ok {
		return t.marshal()
	}
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
	pool := buffers()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBufferVT(*buf); err != nil {
		pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *Undecoded:
		data.Ref()
		m.data = data
		return nil
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
	buf := data.MaterializeToBuffer(buffers())
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
			if err := checkStrings(m.GetContent(), m.GetMetadataJson(), m.GetMessageId(), m.GetItemKey(), m.GetKind()); err != nil {
				return err
			}
		}
		if err := checkDelta(r.GetStateDelta()); err != nil {
			return err
		}
		for _, sd := range r.GetScopeDeltas() {
			if err := checkStrings(sd.GetScope()); err != nil {
				return err
			}
			if err := checkDelta(sd.GetDelta()); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkDelta(d *sessionv1.StateDelta) error {
	for k, v := range d.GetSetJson() {
		if err := checkStrings(k, v); err != nil {
			return err
		}
	}
	return checkStrings(d.GetDelete()...)
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

// Undecoded is a received request's bytes, kept by the codec undecoded.
//
// grpc-go reports a codec's decode failure as INTERNAL ("the server
// failed"), which tells a client that sent bytes that are not the
// method's message, or a string that is not UTF-8, that the same request
// may succeed later; on a stream it even writes that status to the client
// itself, before the handler can say otherwise. So a server receives into
// an Undecoded, which never fails, and decodes with Decode, whose failure
// is the client's: INVALID_ARGUMENT.
type Undecoded struct{ data mem.BufferSlice }

// Decode decodes u into m, the method's request message, and releases u's
// bytes. A failure is INVALID_ARGUMENT naming the message and the defect.
func (u *Undecoded) Decode(m any) error {
	data := u.data
	u.data = nil
	defer data.Free()
	if err := theCodec().Unmarshal(data, m); err != nil {
		return errs.InvalidArgument("the request could not be decoded as %s: %v", messageName(m), err)
	}
	return nil
}

// Len is the size of u's bytes (the encoded request).
func (u *Undecoded) Len() int { return u.data.Len() }

// Free releases u's bytes undecoded (a request refused before decoding).
func (u *Undecoded) Free() {
	u.data.Free()
	u.data = nil
}

func messageName(v any) string {
	if m, ok := v.(protoapi.Message); ok {
		return string(m.ProtoReflect().Descriptor().FullName())
	}
	return fmt.Sprintf("%T", v)
}
