package client

import (
	"runtime"
	"strings"
	"sync"
	"testing"

	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

func pendingStream(sizes ...int) *batchStream {
	bs := &batchStream{inflight: map[uint64]*batchCall{}}
	for i, size := range sizes {
		bs.pending = append(bs.pending, &batchCall{tag: uint64(i + 1), req: &sessionv1.AppendRequest{}, size: size})
	}
	return bs
}

func TestTakeKeepsABatchWithinItsBounds(t *testing.T) {
	cases := []struct {
		name  string
		sizes []int
		want  []int // appends per batch, in order
	}{
		{"all fit", []int{10, 10, 10}, []int{3}},
		{"bytes", []int{MaxBatchBytes / 2, MaxBatchBytes / 2, 1, MaxBatchBytes}, []int{2, 1, 1}},
		{"one at the limit alone", []int{MaxBatchBytes, 1}, []int{1, 1}},
		{"count", make([]int, maxBatchAppends+5), []int{maxBatchAppends, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bs := pendingStream(c.sizes...)
			var got []int
			next := uint64(1)
			for b := bs.take(); b != nil; b = bs.take() {
				got = append(got, len(b.GetAppends()))
				for _, a := range b.GetAppends() {
					if a.GetTag() != next {
						t.Fatalf("tag %d sent where %d was next: batches must keep the callers' order", a.GetTag(), next)
					}
					next++
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("batches %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("batches %v, want %v", got, c.want)
				}
			}
			if len(bs.inflight) != len(c.sizes) || len(bs.pending) != 0 {
				t.Fatalf("%d in flight and %d pending after taking all of %d", len(bs.inflight), len(bs.pending), len(c.sizes))
			}
		})
	}
}

func TestSizeOfBoundsTheEncodedSize(t *testing.T) {
	msg := func(content string) *sessionv1.NewMessage {
		return &sessionv1.NewMessage{Role: sessionv1.Role_ROLE_TOOL, Content: content,
			MetadataJson: `{"k":"v"}`, MessageId: "01J00000000000000000000000"}
	}
	many := &sessionv1.AppendRequest{SessionId: "01J00000000000000000000001"}
	for range 100 {
		many.Messages = append(many.Messages, msg("ü"))
	}
	big := &sessionv1.AppendRequest{SessionId: "s", Messages: []*sessionv1.NewMessage{msg(strings.Repeat("x", MaxBatchBytes))}}
	for name, req := range map[string]*sessionv1.AppendRequest{
		"empty":    {},
		"one":      {SessionId: "s", Messages: []*sessionv1.NewMessage{msg("hello")}},
		"many":     many,
		"long":     {SessionId: "s", Messages: []*sessionv1.NewMessage{msg(strings.Repeat("y", 100000))}},
		"oversize": big,
	} {
		if got, exact := sizeOf(req), proto.Size(req); got < exact {
			t.Errorf("%s: sizeOf = %d below the encoded size %d", name, got, exact)
		}
	}
	if got := sizeOf(big); got != proto.Size(big) {
		t.Errorf("oversize: sizeOf = %d, want the exact %d above the estimate's range", got, proto.Size(big))
	}
}

// countingStream counts the messages sent on it; a Send returns at once,
// as gRPC's does (it only queues the message in the transport).
type countingStream struct {
	grpc.BidiStreamingClient[sessionv1.AppendBatch, sessionv1.AppendOutcomes]
	mu       sync.Mutex
	messages int
	appends  int
}

func (s *countingStream) Send(b *sessionv1.AppendBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.messages++
	s.appends += len(b.GetAppends())
	return nil
}

// Callers that become runnable together — those one outcomes message
// answered — share a message instead of each sending its own: a Send
// returns before the next caller runs, so the caller that finds no send
// under way yields before it sends (settle). With one P the others all run
// in that yield.
func TestCallersRunnableTogetherShareAMessage(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := &countingStream{}
	bs := &batchStream{s: s, inflight: map[uint64]*batchCall{}, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	const callers = 16
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if _, err := bs.enqueue(&sessionv1.AppendRequest{SessionId: "s"}, 10); err != nil {
				t.Error(err)
			}
		}()
	}
	close(start)
	wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.appends != callers || len(bs.inflight) != callers {
		t.Fatalf("%d appends sent, %d in flight, want %d", s.appends, len(bs.inflight), callers)
	}
	if s.messages > callers/4 {
		t.Fatalf("%d callers runnable together sent %d messages, want them to share (at most %d)", callers, s.messages, callers/4)
	}
}
