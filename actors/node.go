package actors

import (
	"context"
	"errors"
	"sync"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
)

// Config configures the writer and the three services of a Node; zero
// values take each one's defaults.
type Config struct {
	Writer   writer.Config
	Audit    audit.Config
	Sessions session.Config
	Plans    plan.Config
}

// Node is agentstate's actors running in one actor system: the writer
// actor (the store's only writer), the audit actor, the sessions directory
// and the plans directory, named "writer", "audit", "sessions" and "plans"
// by default.
//
// Invariant: the writer outlives every session, plan and audit request.
// Start starts it first, Stop stops it last, after the sessions and plans
// have handed it their last writes, so no owner ever submits to a stopped
// writer and nothing accepted is left unwritten.
type Node struct {
	writer   *writer.Writer
	audit    *audit.Service
	sessions *session.Service
	plans    *plan.Service

	stopOnce sync.Once
	stopped  chan struct{} // closed when the first Stop has finished
	stopErr  error         // set before stopped is closed
}

// Start takes store's writer and starts the writer actor, then the audit,
// sessions and plans services on sys. On an error nothing it started is left
// running and the writer is released again. The caller keeps owning store
// and closes it after Stop.
func Start(sys *actor.ActorSystem, store persistence.Store, cfg Config) (*Node, error) {
	if sys == nil || store == nil {
		return nil, errs.InvalidArgument("actors.Start needs an actor system and a store")
	}
	w, err := writer.Start(sys, store, cfg.Writer)
	if err != nil {
		return nil, err
	}
	reader := store.Reader()
	a, err := audit.Start(sys, w, reader, cfg.Audit)
	if err != nil {
		return nil, errors.Join(err, w.Stop(context.Background()))
	}
	s, err := session.Start(sys, w, reader, cfg.Sessions)
	if err != nil {
		return nil, errors.Join(err, w.Stop(context.Background()))
	}
	p, err := plan.Start(sys, w, reader, cfg.Plans)
	if err != nil {
		return nil, errors.Join(err, s.Stop(context.Background()), w.Stop(context.Background()))
	}
	return &Node{writer: w, audit: a, sessions: s, plans: p, stopped: make(chan struct{})}, nil
}

// Writer is the group-commit writer every change goes through.
func (n *Node) Writer() *writer.Writer { return n.writer }

// Audit is the audit service (auditv1.AuditServiceServer).
func (n *Node) Audit() *audit.Service { return n.audit }

// Sessions is the sessions service (sessionv1.SessionServiceServer).
func (n *Node) Sessions() *session.Service { return n.sessions }

// Plans is the plans service (planv1.PlanServiceServer).
func (n *Node) Plans() *plan.Service { return n.plans }

// Stop drains the node: the sessions and plans services stop first (each
// refuses new requests and lets its actors finish and answer their writes
// in flight), then the writer commits everything it accepted and releases
// the store's Writer. When ctx ends first, what is still waiting is
// answered UNAVAILABLE and the error says so.
//
// Stop may be called more than once and from several goroutines; every
// call waits for the first one and returns its result.
func (n *Node) Stop(ctx context.Context) error {
	n.stopOnce.Do(func() {
		defer close(n.stopped)
		var wg sync.WaitGroup
		var sErr, pErr error
		wg.Add(2)
		go func() { defer wg.Done(); sErr = n.sessions.Stop(ctx) }()
		go func() { defer wg.Done(); pErr = n.plans.Stop(ctx) }()
		wg.Wait()
		n.stopErr = errors.Join(sErr, pErr, n.writer.Stop(ctx))
	})
	<-n.stopped
	return n.stopErr
}
