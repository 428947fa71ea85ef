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

// Tracked is a message sent (grpc.ServerStream.SendMsg) with callbacks:
// Released runs once, when the transport no longer holds the message's
// encoded bytes — written to the connection, or dropped with its stream or
// connection — or at once when encoding fails; Progress, if set, runs each
// time another trackedChunk of them (64 KiB) was written before that. grpc's
// Send returns as soon as a message is queued in the transport, which keeps
// it until the client's flow-control window lets it out; Released is what
// tells a sender (the feed streams) that a client that does not read still
// holds its bytes, and Progress that a slow one still reads. It holds for
// messages sent uncompressed, as every message of a node is (it registers
// no compressor): a compressed copy would be the one queued.
//
// One exception: a connection that breaks while its transport holds a
// message drops the message without Released; the sender learns of it by
// the connection's end.
type Tracked struct {
	Message  Marshaler
	Released func()
	Progress func()
	// encoded is set once the codec took the message: a send that failed
	// before (never reached the codec) must run Released itself.
	encoded atomic.Bool
}

// SizeVT is the encoded size of the message (what its send costs).
func (t *Tracked) SizeVT() int { return t.Message.SizeVT() }

// Encoded reports whether the codec took the message; if not, Released
// has not run and will not.
func (t *Tracked) Encoded() bool { return t.encoded.Load() }

// trackedChunk is the granularity of Progress. The transport frees each
// buffer of a message once it wrote it, so the encoded bytes are handed
// to it as chunks of the one backing buffer, each reporting its release;
// the backing buffer returns to the pool with the last.
const trackedChunk = 64 << 10

// trackedFloor is the least capacity a tracked buffer gets: grpc's mem
// package does not count references to buffers at or below its pooling
// threshold (1 KiB), so their release would not be seen.
const trackedFloor = 2 << 10

// chunks counts a tracked message's chunks still held by the transport.
type chunks struct {
	backing *[]byte
	left    atomic.Int32
	t       *Tracked
}

// Put is a chunk's release (mem.BufferPool): the chunk's bytes are
// written; the last returns the backing buffer and reports the message
// released.
func (c *chunks) Put(*[]byte) {
	if c.left.Add(-1) > 0 {
		if c.t.Progress != nil {
			c.t.Progress()
		}
		return
	}
	buffers().Put(c.backing)
	c.t.Released()
}

func (c *chunks) Get(int) *[]byte {
	panic("codec: a tracked message's chunks are not a pool to take from")
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
	if mem.IsBelowBufferPoolingThreshold(trackedFloor) {
		// Our floor is below grpc's pooling threshold (raised by its
		// settings): the bytes would be copied out of sight; report
		// them released now.
		data := append([]byte(nil), *buf...)
		pool.Put(buf)
		t.Released()
		return mem.BufferSlice{mem.SliceBuffer(data)}, nil
	}
	// Every chunk but the last is trackedChunk long; the last takes the
	// rest (and the backing buffer's spare capacity), so none is below
	// the floor.
	n := max(1, size/trackedChunk)
	c := &chunks{backing: buf, t: t}
	c.left.Store(int32(n))
	out := make(mem.BufferSlice, n)
	for i := range n {
		sub := (*buf)[i*trackedChunk:]
		if i < n-1 {
			sub = sub[:trackedChunk:trackedChunk]
		}
		out[i] = mem.NewBuffer(&sub, c)
	}
	return out, nil
}
