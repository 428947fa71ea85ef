package audit

import (
	"context"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/fairshare"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// receive is the audit actor: it serves remote senders' requests and
// refuses the rest.
func (s *Service) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *auditv1.RecordRequest, *auditv1.ListRequest, *auditv1.CountRequest, *auditv1.GetRequest,
		*auditv1.VerifyRequest, *auditv1.PruneRequest, *auditv1.FlushRequest:
		s.serveRemote(ctx.Sender(), m.(proto.Message), principal.OrRemote(ctx.MessageHeader().Get(principal.Header)))
	default:
		s.refuseRemote(ctx.Sender(), m)
	}
}

// serveRemote answers a bare auditv1 request from a Proto.Actor sender (a
// remote node or a future) with the response or a *commonv1.Error. It runs
// the request through the same in-process methods, marked writer.NoWait (a
// full backlog refuses it with RESOURCE_EXHAUSTED), on its own goroutine
// so the audit actor keeps receiving. A request sent without a sender has nobody
// to answer and is dropped.
//
// Every request, reads included, is admitted first, without waiting, as
// the session and plan directories admit their remote senders: it takes a
// slot and its size of the writer's backlog, and one of RemoteInFlight
// slots of its own (a read's answer can be far larger than its request,
// which the backlog's bytes do not see). Either full: RESOURCE_EXHAUSTED.
// One batch of thousands of reads thus costs a bounded number of
// goroutines and answers.
func (s *Service) serveRemote(sender *actor.PID, msg proto.Message, who string) {
	if sender == nil {
		return
	}
	r := &directory.PIDReplier{Root: s.sys.Root, To: sender}
	select {
	case s.remoteSlots <- struct{}{}:
	default:
		r.Reply(nil, errs.ResourceExhausted("the audit service is serving %d remote requests; retry later", cap(s.remoteSlots)))
		return
	}
	release, err := s.w.Backlog().TryAdmit(fairshare.RemotePeers, msg)
	if err != nil {
		<-s.remoteSlots
		r.Reply(nil, err)
		return
	}
	go func() {
		defer func() { release(); <-s.remoteSlots }()
		resp, err := s.dispatch(principal.With(writer.NoWait(context.Background()), who), msg)
		r.Reply(resp, err)
	}()
}

// refuseRemote answers a request of a type the audit service does not
// serve (another service's request sent here by mistake) with
// INVALID_ARGUMENT: every request is answered, so its sender fails at once
// instead of waiting out its timeout. Proto.Actor's own messages (the
// actor's lifecycle) and messages without a sender are not requests.
func (s *Service) refuseRemote(sender *actor.PID, msg any) {
	switch msg.(type) {
	case actor.SystemMessage, actor.AutoReceiveMessage, actor.InfrastructureMessage:
		return
	}
	if sender == nil {
		return
	}
	r := &directory.PIDReplier{Root: s.sys.Root, To: sender}
	r.Reply(nil, errs.InvalidArgument("the audit service cannot serve %T", msg))
}

func (s *Service) dispatch(ctx context.Context, msg proto.Message) (proto.Message, error) {
	switch m := msg.(type) {
	case *auditv1.RecordRequest:
		return nilIfErr(s.Record(ctx, m))
	case *auditv1.ListRequest:
		return nilIfErr(s.List(ctx, m))
	case *auditv1.CountRequest:
		return nilIfErr(s.Count(ctx, m))
	case *auditv1.GetRequest:
		return nilIfErr(s.Get(ctx, m))
	case *auditv1.VerifyRequest:
		return nilIfErr(s.Verify(ctx, m))
	case *auditv1.PruneRequest:
		return nilIfErr(s.Prune(ctx, m))
	case *auditv1.FlushRequest:
		return nilIfErr(s.Flush(ctx, m))
	}
	return nil, errs.InvalidArgument("the audit service cannot serve %T", msg)
}

// nilIfErr turns a typed nil response into an untyped nil.
func nilIfErr[T proto.Message](resp T, err error) (proto.Message, error) {
	if err != nil {
		return nil, err
	}
	return resp, nil
}
