package directory

import (
	"context"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// Replier delivers the one reply to a request.
type Replier interface {
	// Reply delivers resp, or err when the request failed. It must be
	// called exactly once and must not block.
	Reply(resp proto.Message, err error)
}

// Call is a request together with where its reply goes.
type Call struct {
	Msg     proto.Message
	Replier Replier
	// Checked: the façade validated and normalised Msg in the caller's
	// goroutine; the owner does not again.
	Checked bool
	// Principal is who sent Msg (principal.Of the caller's context, or a
	// bare request's header): the owner's audit entries name it.
	Principal string
}

// Reply is what a channel replier delivers.
type Reply struct {
	Msg proto.Message
	Err error
}

// ChanReplier delivers into a buffered channel of capacity 1.
type ChanReplier chan Reply

func (c ChanReplier) Reply(resp proto.Message, err error) { c <- Reply{Msg: resp, Err: err} }

// PIDReplier answers a PID (a remote sender or a future) with the reply or
// a *commonv1.Error, then runs Done (if set) exactly once.
type PIDReplier struct {
	Root *actor.RootContext
	To   *actor.PID
	Done func()
}

func (p *PIDReplier) Reply(resp proto.Message, err error) {
	if err != nil {
		p.Root.Send(p.To, errs.ToProto(err))
	} else {
		p.Root.Send(p.To, resp)
	}
	if p.Done != nil {
		p.Done()
	}
}

// Ask sends msg to pid (a directory or an owner) as a *Call and waits for
// the reply or for ctx. When ctx ends first the request may still be
// carried out; the caller only stops waiting (as with any network call),
// so the answer is OUTCOME_UNKNOWN: UNAVAILABLE would promise that nothing
// was stored.
func Ask(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg proto.Message) (proto.Message, error) {
	return AskOwner(ctx, root, pid, nil, "", msg, false)
}

// AskOwner is Ask of key's owner: sent to it directly when live has it
// (live may be nil), else through the directory dir. checked marks msg as
// validated by the caller (Call.Checked).
func AskOwner(ctx context.Context, root *actor.RootContext, dir *actor.PID, live *LiveOwners, key string, msg proto.Message, checked bool) (proto.Message, error) {
	ch := make(ChanReplier, 1)
	Send(root, dir, live, key, &Call{Msg: msg, Replier: ch, Checked: checked, Principal: principal.Of(ctx)})
	select {
	case r := <-ch:
		return r.Msg, r.Err
	case <-ctx.Done():
		return nil, noReply(ctx.Err())
	}
}

func noReply(cause error) error {
	return errs.OutcomeUnknown("no reply before the deadline, the request may still be applied: %v", cause)
}

// Send hands c to key's owner: directly when live has it open (live may
// be nil), else through the directory dir, which spawns the owner.
func Send(root *actor.RootContext, dir *actor.PID, live *LiveOwners, key string, c *Call) {
	if live != nil && key != "" && live.Send(root, key, c) {
		return
	}
	root.Send(dir, c)
}

// Router carries a request to the owner of id when owners do not live in
// this process's directory (cluster mode; package placement implements
// it). It returns the owner's response or a typed error; it may retry
// within ctx's deadline, so msg must be safe to deliver more than once
// (session writes are: message ids make appends idempotent, a create names
// its id; a fenced or lost plan write stored nothing). It must not keep
// msg.
type Router interface {
	Route(ctx context.Context, kind, id string, msg proto.Message) (proto.Message, error)
}

// Placer is a Router that knows where an id would be owned now. A caller
// that chooses an id itself (a create without a client-chosen id) picks
// one owned by this member, so that the request is not forwarded.
type Placer interface {
	// Local reports whether id of kind would be activated on this member
	// under the current membership (false when it is not known).
	Local(kind, id string) bool
}

// Answer is resp as T, the response an owner of kind gives to its
// request; INTERNAL when it answered something else.
func Answer[T proto.Message](kind string, resp proto.Message) (T, error) {
	out, ok := resp.(T)
	if !ok {
		return out, errs.Internal("%s actor answered %T, want %T", kind, resp, out)
	}
	return out, nil
}
