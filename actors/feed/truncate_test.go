package feed_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/agentstate/agentstate/actors/feed"
	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/persistence"
)

// truncatingReader reads as a store would after a truncation of every
// sequence below cut: those messages are gone. (The store's Truncate
// command is not there yet; the hub learns of a truncation only from
// what it reads, so this is what it sees.)
type truncatingReader struct {
	persistence.Reader
	cut atomic.Int64
}

func (r *truncatingReader) ListMessages(ctx context.Context, id string, from int64, limit int) ([]*sessionv1.Message, error) {
	ms, err := r.Reader.ListMessages(ctx, id, max(from, r.cut.Load()), limit)
	return ms, err
}

// A tail whose cursor lies in a truncated range gets a Truncated event for
// it, then the messages from the first one left: not silence.
func TestSessionTailReportsTruncatedRange(t *testing.T) {
	e := newEnv(t, feed.Config{}, false)
	id := e.create()
	e.appendN(id, 10)
	tr := &truncatingReader{Reader: e.store.Reader()}
	tr.cut.Store(6)
	hub := feed.New(tr, feed.Config{Logger: quiet})
	defer hub.Close(context.Background())
	tail, err := hub.TailSession(e.ctx, &feedv1.TailSessionRequest{SessionId: id, FromSequence: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tail.Close()
	var v sessionView
	readSession(t, tail, &v, 4)
	if len(v.trunc) != 1 || v.trunc[0] != [2]int64{2, 6} {
		t.Fatalf("truncated ranges %v, want [2, 6)", v.trunc)
	}
	dense(t, v.seqs, 6, 4)
}
