package directory

import (
	"context"
	"time"

	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/principal"
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

// Ticket is what Admit took: size bytes and a slot, as principal.
type Ticket struct {
	principal string
	size      int
}

// Admit takes room for a request of size bytes (give it back with
// Release once the request is answered). An in-process caller
// (writer.Waits(ctx)) waits for room until ctx or MaxWait ends; a network
// caller never waits: RESOURCE_EXHAUSTED is its answer, also when its
// principal (fairshare.From(ctx)) holds its share of the backlog.
func (a *Admission) Admit(ctx context.Context, size int) (Ticket, error) {
	if a.Closing != nil {
		if err := a.Closing(); err != nil {
			return Ticket{}, err
		}
	}
	if !writer.Waits(ctx) {
		t := Ticket{principal: fairshare.From(ctx), size: size}
		return t, a.Backlog.TryAcquireAs(t.principal, size)
	}
	t := Ticket{size: size}
	if err := a.Backlog.TryAcquire(size); err == nil {
		return t, nil
	}
	if a.MaxWait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.MaxWait)
		defer cancel()
	}
	return t, a.Backlog.Acquire(ctx, size)
}

// Release gives back what Admit took.
func (a *Admission) Release(t Ticket) { a.Backlog.ReleaseAs(t.principal, t.size) }

// Answered is the replier of an in-process request that Admit took size
// for: the reply gives the room back, then goes to C. So the room is held
// until the owner answers, whether or not the caller still waits (a caller
// whose deadline passed stops waiting; its request still queues at the
// owner and the writer, and the backlog counts it until it is answered).
// And a caller that has its answer has its room back.
type Answered struct {
	C      chan Reply // buffered: Reply never blocks
	admit  *Admission
	ticket Ticket
}

// Answered returns the replier of a request admitted with t.
func (a *Admission) Answered(t Ticket) *Answered {
	return &Answered{C: make(chan Reply, 1), admit: a, ticket: t}
}

func (r *Answered) Reply(resp proto.Message, err error) {
	r.admit.Release(r.ticket)
	r.C <- Reply{Msg: resp, Err: err}
}

// AskOwner admits msg (Admit), hands it to key's owner (Send) and waits
// for the answer or for ctx. Its room is given back when the owner
// answers (Answered), not when ctx ends: ending ctx makes the caller stop
// waiting (OUTCOME_UNKNOWN: the request may still be carried out), not
// the request.
func (a *Admission) AskOwner(ctx context.Context, root *actor.RootContext, dir *actor.PID, live *LiveOwners, key string, msg proto.Message, checked bool) (proto.Message, error) {
	t, err := a.Admit(ctx, writer.RequestSize(msg))
	if err != nil {
		return nil, err
	}
	r := a.Answered(t)
	Send(root, dir, live, key, &Call{Msg: msg, Replier: r, Checked: checked, Principal: principal.Of(ctx)})
	select {
	case rep := <-r.C:
		return rep.Msg, rep.Err
	case <-ctx.Done():
		return nil, noReply(ctx.Err())
	}
}

// noWait is the context of a remote or future sender's request: it does
// not wait, and is apportioned as the remote endpoint's peers.
var noWait = fairshare.With(writer.NoWait(context.Background()), fairshare.RemotePeers)

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
	t, err := a.Admit(noWait, writer.RequestSize(m))
	if err != nil {
		r.Reply(nil, err)
		return nil, false
	}
	r.Done = func() { a.Release(t) }
	return r, true
}
