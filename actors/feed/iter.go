package feed

import (
	"context"
	"errors"
	"io"
	"iter"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
)

// All iterates over the tail's events until it ended (the last event is
// SessionEnded), ctx ended or a read failed (yielded as the error, once).
// Breaking out of the loop leaves the tail open: Close it.
func (t *SessionTail) All(ctx context.Context) iter.Seq2[*feedv1.SessionEvent, error] {
	return all(ctx, t.Next)
}

// All iterates over the tail's events, as SessionTail.All.
func (t *ChangeTail) All(ctx context.Context) iter.Seq2[*feedv1.ChangeEvent, error] {
	return all(ctx, t.Next)
}

func all[E any](ctx context.Context, next func(context.Context) ([]E, error)) iter.Seq2[E, error] {
	return func(yield func(E, error) bool) {
		for {
			es, err := next(ctx)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				var zero E
				yield(zero, err)
				return
			}
			for _, e := range es {
				if !yield(e, nil) {
					return
				}
			}
		}
	}
}
