package plan

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/writer"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

var _ planv1.PlanServiceServer = (*Service)(nil)

// DirectoryName is the name the plans directory is spawned under.
const DirectoryName = "plans"

// Service is the plans façade: the plans directory actor and the Go and
// gRPC API in front of it. Its methods are safe for concurrent use.
type Service struct {
	planv1.UnimplementedPlanServiceServer

	root  *actor.RootContext
	pid   *actor.PID
	env   *env
	admit *directory.Admission
	// live reaches live plan owners without the directory's mailbox.
	live directory.LiveOwners

	stopped  atomic.Bool
	stopOnce sync.Once
	stopErr  error
}

// Start spawns the plans directory (named Config.Name, by default
// DirectoryName) in sys. Plan
// actors hand their writes to wr's actor and load their state, and
// the Service answers History and ErrorDetails, from reader.
func Start(sys *actor.ActorSystem, wr *writer.Writer, reader persistence.Reader, cfg Config) (*Service, error) {
	if sys == nil || wr == nil || reader == nil {
		return nil, errs.InvalidArgument("plan.Start needs an actor system, the audit service and a reader")
	}
	e := &env{reader: reader, cfg: cfg.withDefaults()}
	s := &Service{root: sys.Root, env: e}
	e.owners = directory.NewOwnerSpec("plan", wr, e.cfg.IdleTimeout, e.cfg.AskTimeout, s.closed, planKey, s.serveRead,
		func(id string) directory.Domain { return newOwner(id, e) })
	s.admit = e.owners.Admission
	pid, err := sys.Root.SpawnNamed(e.owners.DirectoryProps(&s.live, e.cfg.MaxLive), e.cfg.Name)
	if err != nil {
		return nil, errs.FailedPrecondition("spawning the plans directory: %v", err)
	}
	s.pid = pid
	return s, nil
}

// closed is the error of a request the stopped service refuses.
func (s *Service) closed() error {
	if s.stopped.Load() {
		return errStopped()
	}
	return nil
}

// planKey routes writes to the owner of the plan (namespace, plan_id),
// keyed by persistence.PlanKey. Reads are unkeyed: they need no owner,
// because the reader sees every acknowledged write.
func planKey(msg proto.Message) (string, bool, error) {
	var id, ns string
	switch msg.(type) {
	case *planv1.RecordErrorRequest, *planv1.SetPolicyRequest, *planv1.RecordSuccessRequest, *planv1.MergeErrorDetailsRequest:
		m := msg.(planRequest)
		id, ns = m.GetPlanId(), m.GetNamespace()
	case *planv1.HistoryRequest, *planv1.ErrorDetailsRequest:
		return "", false, nil
	default:
		return "", false, errs.InvalidArgument("the plans service cannot serve %T", msg)
	}
	if err := ids.CheckPlanID("plan_id", id); err != nil {
		return "", false, err
	}
	if err := ids.CheckNamespace("namespace", ns); err != nil {
		return "", false, err
	}
	return persistence.PlanKey(ns, id), true, nil
}

// planRequest is what every plan request names: its plan.
type planRequest interface {
	GetNamespace() string
	GetPlanId() string
}

// PID is the plans directory. Remote and future senders send it bare
// planv1 requests and get the response or a *commonv1.Error back.
func (s *Service) PID() *actor.PID { return s.pid }

// PassivateAll stops every live plan actor once its in-flight write is
// answered, and returns when none is live or after Config.AskTimeout. The
// next request for a plan activates a new actor that reloads it.
func (s *Service) PassivateAll() {
	ctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.AskTimeout)
	defer cancel()
	s.root.Send(s.pid, &directory.PassivateAll{})
	_ = s.env.owners.Live.WaitNone(ctx)
}

// ClusterProps are the props of the plan owner as a cluster kind (see
// package placement and directory.OwnerSpec.KindProps): the same owner as
// a directory's child, learning its plan id from *cluster.ClusterInit,
// accepting bare planv1 requests from any sender (admitted like every
// request, answered with the response or a *commonv1.Error), passivating
// itself when idle, and moving out — its write in flight answered with its
// real outcome — when the cluster poisons it.
func (s *Service) ClusterProps() *actor.Props { return s.env.owners.KindProps() }

// FencedActivations is how many plan activations found a newer one had
// taken their plan (the store fenced their write; they answered
// UNAVAILABLE and stopped).
func (s *Service) FencedActivations() int64 { return s.env.owners.Fenced.Load() }

// ActiveActors returns the number of live plan actors.
func (s *Service) ActiveActors() int { return s.env.owners.Live.Count() }

// Stop refuses further façade calls, passivates every plan actor (letting
// in-flight writes finish) and stops the directory. Requests still waiting
// when ctx ends are answered UNAVAILABLE. Calling Stop again returns the
// first call's result.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopped.Store(true)
		s.root.Send(s.pid, &directory.PassivateAll{})
		if err := s.env.owners.Live.WaitNone(ctx); err != nil {
			s.stopErr = errs.Unavailable("plan actors still busy at shutdown: %v", err)
		}
		if err := s.root.StopFuture(s.pid).Wait(); err != nil && s.stopErr == nil {
			s.stopErr = errs.Unavailable("stopping the plans directory: %v", err)
		}
		// The directory stopped the owners still alive as it stopped
		// (they are not its children); each stops at once, unless it is
		// inside a store read, which AskTimeout bounds.
		wctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.AskTimeout)
		defer cancel()
		if err := s.env.owners.Live.WaitNone(wctx); err != nil && s.stopErr == nil {
			s.stopErr = errs.Unavailable("stopping the plan actors: %v", err)
		}
	})
	return s.stopErr
}

// call asks the plan's owner: directly when it is live, else through the
// directory. Writes hold backlog room until the owner answers them, also
// when the caller stopped waiting first (directory.Admission.AskOwner:
// in-process callers wait for room, callers whose ctx is marked
// writer.NoWait are refused with RESOURCE_EXHAUSTED).
func (s *Service) call(ctx context.Context, msg proto.Message) (proto.Message, error) {
	if s.stopped.Load() {
		return nil, errStopped()
	}
	id, ok, err := planKey(msg)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errs.Internal("plan façade routed %T, which has no owner", msg)
	}
	if r := s.env.cfg.Router; r != nil {
		return s.route(ctx, r, id, msg) // cluster mode: the owner's node admits it
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.admit.AskOwner(ctx, s.root, s.pid, &s.live, id, msg, false)
}

func (s *Service) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.env.cfg.AskTimeout)
}

// RecordError records one error of a plan and returns it with its
// sequence, classification, retry count and recovery advice.
func (s *Service) RecordError(ctx context.Context, req *planv1.RecordErrorRequest) (*planv1.RecordErrorResponse, error) {
	return ask[*planv1.RecordErrorResponse](s, ctx, req)
}

// SetPolicy sets a plan's max_retries (0..100) for errors recorded after it.
func (s *Service) SetPolicy(ctx context.Context, req *planv1.SetPolicyRequest) (*planv1.SetPolicyResponse, error) {
	return ask[*planv1.SetPolicyResponse](s, ctx, req)
}

// RecordSuccess resets the retry count of one step of a plan.
func (s *Service) RecordSuccess(ctx context.Context, req *planv1.RecordSuccessRequest) (*planv1.RecordSuccessResponse, error) {
	return ask[*planv1.RecordSuccessResponse](s, ctx, req)
}

// MergeErrorDetails merges other writers' keys into a plan's error_details.
func (s *Service) MergeErrorDetails(ctx context.Context, req *planv1.MergeErrorDetailsRequest) (*planv1.MergeErrorDetailsResponse, error) {
	return ask[*planv1.MergeErrorDetailsResponse](s, ctx, req)
}

// History returns a page of a plan's error records in sequence order.
func (s *Service) History(ctx context.Context, req *planv1.HistoryRequest) (*planv1.HistoryResponse, error) {
	if s.stopped.Load() {
		return nil, errs.Unavailable("the plans service is stopped")
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.history(ctx, req)
}

// ErrorDetails returns a plan's recovery summary and whole error_details.
func (s *Service) ErrorDetails(ctx context.Context, req *planv1.ErrorDetailsRequest) (*planv1.ErrorDetailsResponse, error) {
	if s.stopped.Load() {
		return nil, errs.Unavailable("the plans service is stopped")
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.errorDetails(ctx, req)
}

func ask[R proto.Message](s *Service, ctx context.Context, req proto.Message) (R, error) {
	var zero R
	resp, err := s.call(ctx, req)
	if err != nil {
		return zero, err
	}
	return directory.Answer[R]("plan", resp)
}

// serveRead answers reads that reached the directory (remote senders).
func (s *Service) serveRead(c *directory.Call) {
	ctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.AskTimeout)
	defer cancel()
	switch m := c.Msg.(type) {
	case *planv1.HistoryRequest:
		c.Replier.Reply(s.history(ctx, m))
	case *planv1.ErrorDetailsRequest:
		c.Replier.Reply(s.errorDetails(ctx, m))
	default:
		c.Replier.Reply(nil, errs.InvalidArgument("the plans service cannot serve %T", c.Msg))
	}
}

func (s *Service) history(ctx context.Context, r *planv1.HistoryRequest) (*planv1.HistoryResponse, error) {
	f, err := historyQuery(r)
	if err != nil {
		return nil, err
	}
	recs, err := s.env.reader.PlanHistory(ctx, f)
	if err != nil {
		return nil, errs.From(err)
	}
	next := int64(-1)
	if len(recs) == f.Limit {
		// A full page: there may be more (a full last page is followed
		// by an empty one).
		next = recs[len(recs)-1].GetSequence() + 1
	}
	return &planv1.HistoryResponse{Records: recs, NextSequence: next}, nil
}

// errorDetails reads a plan's committed error_details. A plan nothing was
// ever recorded for has the empty summary and the default policy: plans
// are created elsewhere, so an unknown id is not an error here.
func (s *Service) errorDetails(ctx context.Context, r *planv1.ErrorDetailsRequest) (*planv1.ErrorDetailsResponse, error) {
	if err := ids.CheckPlanID("plan_id", r.GetPlanId()); err != nil {
		return nil, err
	}
	if err := ids.CheckNamespace("namespace", r.GetNamespace()); err != nil {
		return nil, err
	}
	ps, err := s.env.reader.GetPlan(ctx, r.GetNamespace(), r.GetPlanId())
	if errors.Is(err, errs.ErrNotFound) {
		return &planv1.ErrorDetailsResponse{
			Details: &planv1.ErrorDetails{}, DetailsJson: "{}", MaxRetries: persistence.DefaultMaxRetries,
		}, nil
	}
	if err != nil {
		return nil, errs.From(err)
	}
	_, rec, err := splitDetails(ps.ErrorDetailsJSON)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		rec = &planv1.ErrorDetails{}
	}
	doc := ps.ErrorDetailsJSON
	if doc == "" {
		doc = "{}"
	}
	return &planv1.ErrorDetailsResponse{Details: rec, DetailsJson: doc, MaxRetries: ps.MaxRetries}, nil
}
