package directory

import (
	"context"
	"time"

	"github.com/agentstate/agentstate/actors/writer"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// Admission is the one way a request to an owner enters the writer's
// backlog, whichever way it came (the Go and gRPC façade, a remote or
// future sender to the directory, a cluster kind): it takes a slot and
// the request's bytes (writer.RequestSize) until the request is answered,
// and refuses everything once the service stops.
type Admission struct {
	Backlog *writer.Backlog
	// Closing, when it returns an error, refuses the request with it.
	Closing func() error
	// MaxWait bounds how long an in-process caller waits for room.
	MaxWait time.Duration
}

// Admit takes room for a request of size bytes (give it back with
// Release once the request is answered). An in-process caller
// (writer.Waits(ctx)) waits for room until ctx or MaxWait ends; a network
// caller never waits: RESOURCE_EXHAUSTED is its answer.
func (a *Admission) Admit(ctx context.Context, size int) error {
	if a.Closing != nil {
		if err := a.Closing(); err != nil {
			return err
		}
	}
	if err := a.Backlog.TryAcquire(size); err == nil || !writer.Waits(ctx) {
		return err
	}
	if a.MaxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.MaxWait)
		defer cancel()
	}
	return a.Backlog.Acquire(ctx, size)
}

// Release gives back what Admit took.
func (a *Admission) Release(size int) { a.Backlog.Release(size) }

var noWait = writer.NoWait(context.Background())

// bare admits a bare request from a remote or future sender and returns
// the replier that answers it and then gives its room back. ok is false
// when there is nobody to answer or the request was refused (answered).
func (a *Admission) bare(ctx actor.Context, m proto.Message) (r *PIDReplier, ok bool) {
	sender := ctx.Sender()
	if sender == nil {
		return nil, false // nobody to answer; a request must be asked, not sent
	}
	r = &PIDReplier{Root: ctx.ActorSystem().Root, To: sender}
	if a == nil {
		return r, true
	}
	size := writer.RequestSize(m)
	if err := a.Admit(noWait, size); err != nil {
		r.Reply(nil, err)
		return nil, false
	}
	r.Done = func() { a.Release(size) }
	return r, true
}
