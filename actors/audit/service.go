package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentstate/agentstate/actors/dispatch"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Service is the audit trail: its in-process API, and the actor remote
// senders address. It implements auditv1.AuditServiceServer; the node
// registers it with its gRPC server as is. It writes through the node's
// group-commit writer, as session and plan actors do, and reads on the
// store's read-only connections.
type Service struct {
	auditv1.UnimplementedAuditServiceServer

	sys    *actor.ActorSystem
	pid    *actor.PID
	w      *writer.Writer
	reader persistence.Reader
	cfg    Config
	// remoteSlots holds a token per remote request being served (see
	// serveRemote).
	remoteSlots chan struct{}
}

// Start spawns the audit actor, named cfg.Name ("audit"), which serves
// remote senders' bare auditv1 requests; the entries go through w. It
// fails when the name is in use.
func Start(sys *actor.ActorSystem, w *writer.Writer, reader persistence.Reader, cfg Config) (*Service, error) {
	if sys == nil || w == nil || reader == nil {
		return nil, errs.InvalidArgument("audit.Start needs an actor system, a writer and a reader")
	}
	s := &Service{sys: sys, w: w, reader: reader, cfg: cfg.withDefaults()}
	s.remoteSlots = make(chan struct{}, s.cfg.RemoteInFlight)
	pid, err := sys.Root.SpawnNamed(actor.PropsFromFunc(s.receive,
		actor.WithDispatcher(dispatch.Shared())), s.cfg.Name)
	if err != nil {
		if errors.Is(err, actor.ErrNameExists) {
			return nil, errs.AlreadyExists("an actor named %q already runs in this actor system", s.cfg.Name)
		}
		return nil, errs.Internal("spawn audit actor: %v", err)
	}
	s.pid = pid
	return s, nil
}

// PID is the audit actor: remote senders send it the bare auditv1
// requests and get the response or a *commonv1.Error.
func (s *Service) PID() *actor.PID { return s.pid }

// Writer is the group-commit writer the trail writes through.
func (s *Service) Writer() *writer.Writer { return s.w }

// Record validates req (NewEntry; agentstate's own event types are
// refused: ReservedEventType) and hands the entry to the writer. With
// req.Sync it answers after the entry's transaction committed (durable);
// otherwise it answers at once with durable=false, and the entry commits
// in the next transaction (writer.Writer.Enqueue). Either way the entry
// returned carries its final event_id and created_at. A full backlog
// makes it wait, or refuses it with RESOURCE_EXHAUSTED when ctx is marked
// writer.NoWait.
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
	if err := s.stamp(ctx, e); err != nil {
		return nil, err
	}
	clientID := req.GetEventId() != ""
	var cmd persistence.Command = &persistence.RecordAudit{Entries: []*auditv1.AuditEntry{e}}
	var client *persistence.RecordClientAudit
	if clientID {
		client = &persistence.RecordClientAudit{Entries: []*auditv1.AuditEntry{e}}
		cmd = client
	}
	if !req.GetSync() {
		if clientID {
			if resp, err := s.storedRecord(ctx, e); resp != nil || err != nil {
				return resp, err
			}
		}
		// The writer sets Position and the hashes on e while the caller
		// may use what it got: it gets a copy.
		out := &auditv1.AuditEntry{EventId: e.EventId, EventType: e.EventType, PlanId: e.PlanId,
			SessionId: e.SessionId, ProjectName: e.ProjectName, ActorName: e.ActorName,
			UserIdentity: e.UserIdentity, DetailsJson: e.DetailsJson, Principal: e.Principal, Namespace: e.Namespace,
			CreatedAt: &timestamppb.Timestamp{Seconds: e.CreatedAt.Seconds, Nanos: e.CreatedAt.Nanos}}
		if err := s.w.Enqueue(ctx, cmd); err != nil {
			return nil, err
		}
		return &auditv1.RecordResponse{Entry: out}, nil
	}
	r, err := s.w.ApplyRecord(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if r.Err != nil {
		return nil, r.Err
	}
	if rec := client.ResultOf(r).Recorded; clientID && len(rec) == 1 && rec[0].Duplicate {
		return &auditv1.RecordResponse{Entry: proto.Clone(rec[0].Entry).(*auditv1.AuditEntry),
			Durable: true, Duplicate: true}, nil
	}
	return &auditv1.RecordResponse{Entry: e, Durable: true}, nil
}

// stamp names, on a caller's entry, the principal of ctx (never one the
// caller wrote) and the namespace the entry belongs to: its session's, or
// persistence.DefaultNamespace when it names none or one that is not
// stored (deleted, or never created).
func (s *Service) stamp(ctx context.Context, e *auditv1.AuditEntry) error {
	e.Principal, e.Namespace = principal.Of(ctx), persistence.DefaultNamespace
	if e.SessionId == "" {
		return nil
	}
	sess, err := s.reader.GetSession(ctx, e.SessionId)
	switch {
	case errs.CodeOf(err) == errs.NotFoundCode:
	case err != nil:
		return err
	case sess.GetNamespace() != "":
		e.Namespace = sess.GetNamespace()
	}
	return nil
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
	if err := s.w.Flush(ctx); err != nil {
		return nil, err
	}
	return &auditv1.FlushResponse{}, nil
}

func (s *Service) String() string { return fmt.Sprintf("audit.Service(%s)", s.pid) }
