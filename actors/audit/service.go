package audit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentstate/agentstate/actors/dispatch"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Service is the audit writer actor together with its in-process API. It
// implements auditv1.AuditServiceServer; the node registers it with its
// gRPC server as is.
//
// Invariant: nothing reaches the actor from this Service after stopping
// is set; mu orders that flag against every hand-over, which is what lets
// Stop promise that everything accepted before it is drained.
type Service struct {
	auditv1.UnimplementedAuditServiceServer

	sys     *actor.ActorSystem
	pid     *actor.PID
	reader  persistence.Reader
	backlog *Backlog
	cfg     Config

	mu       sync.RWMutex
	stopping bool

	stopOnce sync.Once
	drained  chan struct{} // closed by the actor once it released the Writer
	stopErr  error         // set before drained is closed
}

// Start takes the store's sole Writer and spawns the writer actor, named
// cfg.Name ("audit"). It fails when the Writer is taken or the name is in
// use; then nothing is left running.
func Start(sys *actor.ActorSystem, store persistence.Store, cfg Config) (*Service, error) {
	if sys == nil || store == nil {
		return nil, errs.InvalidArgument("audit.Start needs an actor system and a store")
	}
	cfg = cfg.withDefaults()
	pw, err := store.Writer()
	if err != nil {
		return nil, err
	}
	s := &Service{
		sys:     sys,
		reader:  store.Reader(),
		backlog: NewBacklog(cfg.Backlog),
		cfg:     cfg,
		drained: make(chan struct{}),
	}
	// The producer returns the same instance on every call, so a restart
	// after a panic keeps the queue and the in-flight batch.
	wr := &writer{svc: s, w: pw, cfg: cfg, log: cfg.Logger, backoff: cfg.RetryBackoff}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return wr },
		actor.WithDispatcher(dispatch.Shared())), cfg.Name)
	if err != nil {
		pw.Release()
		if errors.Is(err, actor.ErrNameExists) {
			return nil, errs.AlreadyExists("an actor named %q already runs in this actor system", cfg.Name)
		}
		return nil, errs.Internal("spawn audit writer: %v", err)
	}
	s.pid = pid
	return s, nil
}

// PID is the writer actor. Session and plan actors send it *Submit with
// ctx.Request; remote senders send it the bare auditv1 requests and get
// the response or a *commonv1.Error.
func (s *Service) PID() *actor.PID { return s.pid }

// Backlog is the bound on pending commands; senders of Submit take a slot
// before submitting and release it once answered.
func (s *Service) Backlog() *Backlog { return s.backlog }

// Record validates req (NewEntry; agentstate's own event types are
// refused: ReservedEventType) and hands the entry to the writer. With
// req.Sync it answers after the entry's transaction committed (durable);
// otherwise it answers at once with durable=false, and the entry commits
// in the next transaction. Either way the entry returned carries its final
// event_id and created_at. A full backlog makes it wait, or refuses it
// with RESOURCE_EXHAUSTED when ctx is marked NoWait.
//
// With a client-chosen req.EventId the request is safe to retry: if that
// id is stored with the same content, the answer is the stored entry with
// duplicate=true (and durable=true) and nothing is written; with other
// content it is ALREADY_EXISTS. The store decides inside the writer's
// transaction (persistence.RecordClientAudit), so this holds for a retry
// that overtakes its original in one batch, after a restart, and on
// another node of a cluster. An async request is looked up first, so that
// a retry of a committed entry is answered as the duplicate it is; one
// that races its still uncommitted original is accepted and stored once.
func (s *Service) Record(ctx context.Context, req *auditv1.RecordRequest) (*auditv1.RecordResponse, error) {
	if err := checkCallerEventType(req.GetEventType()); err != nil {
		return nil, err
	}
	e, err := NewEntry(req, time.Now())
	if err != nil {
		return nil, err
	}
	var it *item
	if req.GetEventId() != "" {
		cmd := &persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{e}}
		it = &item{cmd: cmd, size: cmd.Size(), record: true, clientID: true}
	} else {
		cmd := &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}}
		it = &item{cmd: cmd, size: cmd.Size(), record: true}
	}
	if !req.GetSync() {
		if it.clientID {
			if resp, err := s.storedRecord(ctx, e); resp != nil || err != nil {
				return resp, err
			}
		}
		// The writer sets Position and the hashes on e while the caller
		// may use what it got: it gets a copy.
		out := &auditv1.AuditEntry{EventId: e.EventId, EventType: e.EventType, PlanId: e.PlanId,
			SessionId: e.SessionId, ProjectName: e.ProjectName, ActorName: e.ActorName,
			UserIdentity: e.UserIdentity, DetailsJson: e.DetailsJson,
			CreatedAt: &timestamppb.Timestamp{Seconds: e.CreatedAt.Seconds, Nanos: e.CreatedAt.Nanos}}
		it.async = true
		if err := s.hand(ctx, it, true); err != nil {
			return nil, err
		}
		return &auditv1.RecordResponse{Entry: out}, nil
	}
	r, err := s.call(ctx, it, true)
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	if it.clientID && len(r.Recorded) == 1 && r.Recorded[0].Duplicate {
		return &auditv1.RecordResponse{Entry: proto.Clone(r.Recorded[0].Entry).(*auditv1.AuditEntry),
			Durable: true, Duplicate: true}, nil
	}
	return &auditv1.RecordResponse{Entry: e, Durable: true}, nil
}

// storedRecord answers an async record whose client-chosen event id is
// committed already: the stored entry as a duplicate, or ALREADY_EXISTS
// when its content differs. Both nil: the id is not stored (yet).
func (s *Service) storedRecord(ctx context.Context, e *auditv1.AuditEntry) (*auditv1.RecordResponse, error) {
	stored, err := s.reader.GetAudit(ctx, e.GetEventId())
	switch {
	case errs.CodeOf(err) == errs.NotFoundCode:
		return nil, nil
	case err != nil:
		return nil, err
	case !persistence.SameAuditContent(stored, e):
		return nil, errs.AlreadyExists("audit event_id %s is stored already with other content", e.GetEventId())
	}
	return &auditv1.RecordResponse{Entry: stored, Durable: true, Duplicate: true}, nil
}

// Flush returns once everything accepted before it has committed, or the
// error of the transaction that failed to commit some of it.
func (s *Service) Flush(ctx context.Context, _ *auditv1.FlushRequest) (*auditv1.FlushResponse, error) {
	r, err := s.call(ctx, &item{}, false)
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return &auditv1.FlushResponse{}, nil
}

// Apply runs cmd in the writer's next group commit and returns its result
// once the transaction committed (or failed). It is the in-process
// equivalent of a Submit, for callers that are not actors.
func (s *Service) Apply(ctx context.Context, cmd persistence.Command) (persistence.Result, error) {
	if cmd == nil {
		return persistence.Result{}, errs.InvalidArgument("no command")
	}
	return s.call(ctx, &item{cmd: cmd, size: cmd.Size()}, true)
}

// call hands it over and waits for its answer. A ctx that ends first
// returns UNAVAILABLE; the command may still commit.
func (s *Service) call(ctx context.Context, it *item, slot bool) (persistence.Result, error) {
	it.done = make(chan persistence.Result, 1)
	if err := s.hand(ctx, it, slot); err != nil {
		return persistence.Result{}, err
	}
	select {
	case r := <-it.done:
		return r, nil
	case <-ctx.Done():
		return persistence.Result{}, errs.OutcomeUnknown("no answer from the audit writer before the deadline (%v); the command may still commit", ctx.Err())
	}
}

// hand gives it to the actor, after taking a backlog slot when asked.
func (s *Service) hand(ctx context.Context, it *item, slot bool) error {
	if s.isStopping() {
		return errStopped
	}
	if slot {
		if err := s.backlog.Admit(ctx); err != nil {
			return err
		}
		it.slot = s.backlog
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopping {
		if it.slot != nil {
			it.slot.Release()
		}
		return errStopped
	}
	s.sys.Root.Send(s.pid, &local{it: it})
	return nil
}

var errStopped = errs.Unavailable("the audit writer is stopped")

func (s *Service) isStopping() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.stopping
}

// Stop refuses new work with UNAVAILABLE, waits until everything accepted
// before it has committed, and releases the Writer. When ctx ends first,
// the drain is abandoned: what is still queued is answered UNAVAILABLE (and
// async records among it are lost, which the error reports). Stop may be
// called more than once; every call returns the first drain's outcome.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		s.stopping = true
		s.mu.Unlock()
		s.sys.Root.Send(s.pid, &drain{})
	})
	select {
	case <-s.drained:
	case <-ctx.Done():
		s.sys.Root.Send(s.pid, &abandon{})
		<-s.drained // at most the transaction in flight
	}
	return s.stopErr
}

// closed is called by the actor, once, after it released the Writer.
func (s *Service) closed(lost int) {
	if lost > 0 {
		s.stopErr = errs.Unavailable("audit writer stopped; %d accepted async records were not stored", lost)
	}
	close(s.drained)
}

func (s *Service) String() string { return fmt.Sprintf("audit.Service(%s)", s.pid) }
