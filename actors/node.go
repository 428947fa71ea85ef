package actors

import (
	"context"
	"errors"
	"sync"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
)

// Config configures the three services of a Node; zero values take each
// service's defaults.
type Config struct {
	Audit    audit.Config
	Sessions session.Config
	Plans    plan.Config
}

// Node is agentstate's actors running in one actor system: the audit actor
// (the store's only writer), the sessions directory and the plans
// directory, named "audit", "sessions" and "plans" by default.
//
// Invariant: the audit actor outlives every session and plan actor. Start
// starts it first, Stop stops it last, after the sessions and plans have
// handed it their last writes, so no owner ever submits to a stopped
// writer and nothing accepted is left unwritten.
type Node struct {
	audit    *audit.Service
	sessions *session.Service
	plans    *plan.Service

	stopOnce sync.Once
	stopped  chan struct{} // closed when the first Stop has finished
	stopErr  error         // set before stopped is closed
}

// Start takes store's writer and starts the audit actor, then the sessions
// and plans services on sys. On an error nothing it started is left
// running and the writer is released again. The caller keeps owning store
// and closes it after Stop.
func Start(sys *actor.ActorSystem, store persistence.Store, cfg Config) (*Node, error) {
	if sys == nil || store == nil {
		return nil, errs.InvalidArgument("actors.Start needs an actor system and a store")
	}
	a, err := audit.Start(sys, store, cfg.Audit)
	if err != nil {
		return nil, err
	}
	reader := store.Reader()
	s, err := session.Start(sys, a, reader, cfg.Sessions)
	if err != nil {
		return nil, errors.Join(err, a.Stop(context.Background()))
	}
	p, err := plan.Start(sys, a, reader, cfg.Plans)
	if err != nil {
		return nil, errors.Join(err, s.Stop(context.Background()), a.Stop(context.Background()))
	}
	return &Node{audit: a, sessions: s, plans: p, stopped: make(chan struct{})}, nil
}

// Audit is the audit service (auditv1.AuditServiceServer).
func (n *Node) Audit() *audit.Service { return n.audit }

// Sessions is the sessions service (sessionv1.SessionServiceServer).
func (n *Node) Sessions() *session.Service { return n.sessions }

// Plans is the plans service (planv1.PlanServiceServer).
func (n *Node) Plans() *plan.Service { return n.plans }

// Stop drains the node: the sessions and plans services stop first (each
// refuses new requests and lets its actors finish and answer their writes
// in flight), then the audit actor commits everything it accepted and
// releases the writer. When ctx ends first, what is still waiting is
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
		n.stopErr = errors.Join(sErr, pErr, n.audit.Stop(ctx))
	})
	<-n.stopped
	return n.stopErr
}
