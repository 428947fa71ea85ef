package session

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"google.golang.org/protobuf/proto"
)

// AppendAsync is Append for a caller that serves many appends at once (an
// AppendBatches stream): it validates and admits req on the caller's
// goroutine, as Append does, hands it to its session owner and returns;
// done then receives the outcome exactly once — the response, the typed
// error, or OUTCOME_UNKNOWN when no answer came within AskTimeout — on the
// goroutine that decided it (the session actor's, a timer's, or the
// caller's when req was refused before it was handed over). done must not
// block: it runs on an actor. No goroutine waits per append, so the
// appends a commit decides wake their stream once, not once each.
//
// ctx bounds only the admission (a network sender's is refused at once
// when the backlog is full; an in-process caller's waits, as Append's);
// once handed over the append is carried out whatever ctx does. A cluster
// node routes through its router, which blocks: there the append is
// served on a goroutine of its own.
func (s *Service) AppendAsync(ctx context.Context, req *sessionv1.AppendRequest, done func(*sessionv1.AppendResponse, error)) {
	n, err := normalizeAppend(req, s.env.cfg)
	if err != nil {
		done(nil, err)
		return
	}
	if s.env.cfg.Router != nil {
		go func() { done(routed[*sessionv1.AppendResponse](ctx, s, n)) }()
		return
	}
	id, err := s.owner(n)
	if err != nil {
		done(nil, err)
		return
	}
	t, err := s.admit.Admit(ctx, writer.RequestSize(n))
	if err != nil {
		done(nil, err)
		return
	}
	r := &asyncReplier{done: done, admit: s.admit, ticket: t}
	r.timer = time.AfterFunc(s.env.cfg.AskTimeout, r.expire)
	directory.Send(s.sys.Root, s.pid, &s.live, id, &directory.Call{Msg: n, Replier: r, Checked: true, Principal: principal.Of(ctx)})
}

// asyncReplier answers an AppendAsync: the owner's reply or the timeout,
// whichever comes first, goes to done; the other is dropped.
//
// Invariants: done is called once (answered); the admission's room is
// given back when the owner replies, as for a blocking call, and not on
// the timeout (the append may still be queued, holding its place).
type asyncReplier struct {
	done     func(*sessionv1.AppendResponse, error)
	admit    *directory.Admission
	ticket   directory.Ticket
	timer    *time.Timer // set before the call is sent
	answered atomic.Bool
}

func (r *asyncReplier) Reply(resp proto.Message, err error) {
	r.admit.Release(r.ticket)
	if !r.answered.CompareAndSwap(false, true) {
		return
	}
	r.timer.Stop()
	if err != nil {
		r.done(nil, err)
		return
	}
	out, ok := resp.(*sessionv1.AppendResponse)
	if !ok {
		r.done(nil, errs.Internal("session actor answered %T, want %T", resp, out))
		return
	}
	r.done(out, nil)
}

func (r *asyncReplier) expire() {
	if r.answered.CompareAndSwap(false, true) {
		r.done(nil, noAnswer(context.DeadlineExceeded))
	}
}
