package codec

import (
	"sync/atomic"

	"google.golang.org/grpc/mem"
)

// Marshaler is a message with generated (vtprotobuf) encoding code.
type Marshaler interface {
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
}

// Tracked is a message sent (grpc.ServerStream.SendMsg) with a callback:
// Released runs once, when the transport no longer holds the message's
// encoded bytes — written to the connection, or dropped with its stream or
// connection — or at once when encoding fails. grpc's Send returns as soon
// as a message is queued in the transport, which keeps it until the
// client's flow-control window lets it out; Released is what tells a
// sender (the feed streams) that a client that does not read still holds
// its bytes. It holds for messages sent uncompressed, as every message of
// a node is (it registers no compressor): a compressed copy would be the
// one queued.
//
// One exception: a connection that breaks while its transport holds a
// message drops the message without Released; the sender learns of it by
// the connection's end.
type Tracked struct {
	Message  Marshaler
	Released func()
	// encoded is set once the codec took the message: a send that failed
	// before (never reached the codec) must run Released itself.
	encoded atomic.Bool
}

// Encoded reports whether the codec took the message; if not, Released
// has not run and will not.
func (t *Tracked) Encoded() bool { return t.encoded.Load() }

// trackedFloor is the least capacity a tracked message's buffer gets:
// grpc's mem package does not count references to smaller buffers (it
// copies them), so their release would not be seen.
const trackedFloor = 1 << 10

// releasing returns buffers to the codec's pool and reports it.
type releasing struct {
	mem.BufferPool
	released func()
}

func (p releasing) Put(b *[]byte) {
	p.BufferPool.Put(b)
	p.released()
}

func (t *Tracked) marshal() (mem.BufferSlice, error) {
	t.encoded.Store(true)
	size := t.Message.SizeVT()
	pool := buffers()
	buf := pool.Get(max(size, trackedFloor))
	*buf = (*buf)[:size]
	if _, err := t.Message.MarshalToSizedBufferVT(*buf); err != nil {
		pool.Put(buf)
		t.Released()
		return nil, err
	}
	if mem.IsBelowBufferPoolingThreshold(cap(*buf)) {
		// Not counted by grpc (a larger pooling threshold than ours):
		// the bytes are copied out of reach; report them released.
		data := append([]byte(nil), *buf...)
		pool.Put(buf)
		t.Released()
		return mem.BufferSlice{mem.SliceBuffer(data)}, nil
	}
	return mem.BufferSlice{mem.NewBuffer(buf, releasing{BufferPool: pool, released: t.Released})}, nil
}
