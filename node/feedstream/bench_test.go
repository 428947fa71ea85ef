package feedstream_test

import (
	"testing"

	"github.com/agentstate/agentstate/node/feedstream"
)

// BenchmarkTailSession reads a session of 200 messages of 4 KiB from
// sequence 0 over gRPC on loopback, per iteration: the cost of the
// budget's bookkeeping (a page's room, a lease and a tracked buffer per
// event) on the feeds' common path.
func BenchmarkTailSession(b *testing.B) {
	const msgs = 200
	h := newHarness(b, feedstream.Limits{})
	id := h.session(msgs, 4<<10)
	cc := h.dial(false)
	b.SetBytes(msgs * 4 << 10)
	b.ResetTimer()
	for b.Loop() {
		if seqs := h.read(cc, id, 0, msgs); len(seqs) != msgs {
			b.Fatalf("read %d messages", len(seqs))
		}
	}
}
