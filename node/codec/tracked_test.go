package codec

import (
	"strings"
	"testing"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/protobuf/proto"
)

// TestTrackedReportsItsBytesReleased: a tracked message's encoded bytes
// are the message's; Released runs once, when the last reference to them
// is gone (the transport wrote them), not when the send returns; Progress
// runs for each 64 KiB chunk released before. A small message is tracked
// too: grpc does not count references to buffers below 1 KiB.
func TestTrackedReportsItsBytesReleased(t *testing.T) {
	for _, tc := range []struct {
		content  int
		progress int
	}{{10, 0}, {100 << 10, 0}, {256<<10 + 7, 3}} {
		ev := &feedv1.SessionEvent{Event: &feedv1.SessionEvent_Message{Message: &sessionv1.Message{
			Sequence: 7, Content: strings.Repeat("x", tc.content)}}}
		released, progress := 0, 0
		tr := &Tracked{Message: ev, Released: func() { released++ }, Progress: func() { progress++ }}
		data, err := Codec().Marshal(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !tr.Encoded() {
			t.Fatal("Encoded is false after the codec took the message")
		}
		var got feedv1.SessionEvent
		if err := proto.Unmarshal(data.Materialize(), &got); err != nil || !proto.Equal(&got, ev) {
			t.Fatalf("content %d: decoded %v (%v), want the message", tc.content, &got, err)
		}
		data.Ref()  // the transport's reference
		data.Free() // the send returned
		if released != 0 {
			t.Fatalf("content %d: released while the transport holds the bytes", tc.content)
		}
		data.Free() // written
		if released != 1 || progress != tc.progress {
			t.Fatalf("content %d: released %d times with %d progress reports, want once with %d", tc.content, released, progress, tc.progress)
		}
	}
}
