package writer

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/agentstate/agentstate/actors/dispatch"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
)

// Writer is the group-commit writer actor together with its in-process
// API.
//
// Invariant: nothing reaches the actor from this Writer after stopping is
// set; mu orders that flag against every hand-over, which is what lets
// Stop promise that everything accepted before it is drained.
type Writer struct {
	sys     *actor.ActorSystem
	pid     *actor.PID
	backlog *Backlog
	cfg     Config

	mu       sync.RWMutex
	stopping bool

	stopOnce sync.Once
	drained  chan struct{} // closed by the actor once it released the Writer
	stopErr  error         // set before drained is closed
}

// Start takes the store's sole persistence.Writer and spawns the writer
// actor, named cfg.Name ("writer"). It fails when the Writer is taken or
// the name is in use; then nothing is left running.
func Start(sys *actor.ActorSystem, store persistence.Store, cfg Config) (*Writer, error) {
	if sys == nil || store == nil {
		return nil, errs.InvalidArgument("writer.Start needs an actor system and a store")
	}
	cfg = cfg.withDefaults()
	pw, err := store.Writer()
	if err != nil {
		return nil, err
	}
	s := &Writer{
		sys:     sys,
		backlog: NewBacklog(cfg.Backlog, cfg.BacklogBytes),
		cfg:     cfg,
		drained: make(chan struct{}),
	}
	// The producer returns the same instance on every call, so a restart
	// after a panic keeps the queue and the in-flight batch.
	c := &committer{svc: s, w: pw, cfg: cfg, log: cfg.Logger, backoff: cfg.RetryBackoff}
	pid, err := sys.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return c },
		actor.WithDispatcher(dispatch.Shared())), cfg.Name)
	if err != nil {
		pw.Release()
		if errors.Is(err, actor.ErrNameExists) {
			return nil, errs.AlreadyExists("an actor named %q already runs in this actor system", cfg.Name)
		}
		return nil, errs.Internal("spawn writer: %v", err)
	}
	s.pid = pid
	return s, nil
}

// PID is the writer actor. Session and plan actors send it *Submit with
// ctx.Request. It is local to its process: nothing remote may reach it.
func (s *Writer) PID() *actor.PID { return s.pid }

// Backlog is the bound on pending commands and their bytes; senders of
// Submit take a slot and their request's size (RequestSize) before
// submitting and release them once answered.
func (s *Writer) Backlog() *Backlog { return s.backlog }

// Apply runs cmd in the writer's next group commit and returns its result
// once the transaction committed (or failed). It is the in-process
// equivalent of a Submit, for callers that are not actors. A full backlog
// makes it wait, or refuses it with RESOURCE_EXHAUSTED when ctx is marked
// NoWait. A ctx that ends before the answer returns OUTCOME_UNKNOWN: the
// command may still commit.
func (s *Writer) Apply(ctx context.Context, cmd persistence.Command) (persistence.Result, error) {
	if cmd == nil {
		return persistence.Result{}, errs.InvalidArgument("no command")
	}
	return s.call(ctx, &item{cmd: cmd, size: cmd.Size()}, true)
}

// ApplyRecord is Apply for a stand-alone record (persistence.AuditRecords
// or AuditClientRecords) whose entries depend on no other command:
// the writer merges those of one batch into one command of each type,
// which saves a savepoint per entry. A RecordClientAudit's Result holds its
// own entries' outcomes only. Other commands are applied as by Apply.
func (s *Writer) ApplyRecord(ctx context.Context, cmd persistence.Command) (persistence.Result, error) {
	if cmd == nil {
		return persistence.Result{}, errs.InvalidArgument("no command")
	}
	return s.call(ctx, recordItem(cmd), true)
}

// Enqueue hands a record over as ApplyRecord does, but returns once the
// writer accepted it, before it commits. Guarantee: an accepted record is
// stored exactly once unless the process dies before its commit or Stop's
// deadline abandons the drain (Stop then reports how many were lost). When
// its transaction rolls back, it goes back to the front of the queue and
// rides in the next transaction, however many attempts that takes
// (Observer.AsyncRetried counts these); a record the store refuses on its
// own is lost (Observer.AsyncLost).
func (s *Writer) Enqueue(ctx context.Context, cmd persistence.Command) error {
	if cmd == nil {
		return errs.InvalidArgument("no command")
	}
	it := recordItem(cmd)
	it.async = true
	return s.hand(ctx, it, true)
}

func recordItem(cmd persistence.Command) *item {
	it := &item{cmd: cmd, size: cmd.Size()}
	switch cmd.Touches().Audit {
	case persistence.AuditClientRecords:
		it.record, it.clientID = true, true
	case persistence.AuditRecords:
		it.record = true
	}
	return it
}

// Flush returns once everything accepted before it has committed, or the
// error of the transaction that failed to commit some of it.
func (s *Writer) Flush(ctx context.Context) error {
	r, err := s.call(ctx, &item{}, false)
	if err != nil {
		return err
	}
	return r.Err
}

// call hands it over and waits for its answer.
func (s *Writer) call(ctx context.Context, it *item, slot bool) (persistence.Result, error) {
	it.done = make(chan persistence.Result, 1)
	if err := s.hand(ctx, it, slot); err != nil {
		return persistence.Result{}, err
	}
	select {
	case r := <-it.done:
		return r, nil
	case <-ctx.Done():
		return persistence.Result{}, errs.OutcomeUnknown("no answer from the writer before the deadline (%v); the command may still commit", ctx.Err())
	}
}

// hand gives it to the actor, after taking a backlog slot when asked.
func (s *Writer) hand(ctx context.Context, it *item, slot bool) error {
	if s.isStopping() {
		return errStopped
	}
	if slot {
		principal, err := s.backlog.Admit(ctx, it.size)
		if err != nil {
			return err
		}
		it.slot, it.principal = s.backlog, principal
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.stopping {
		if it.slot != nil {
			it.slot.ReleaseAs(it.principal, it.size)
		}
		return errStopped
	}
	s.sys.Root.Send(s.pid, &local{it: it})
	return nil
}

var errStopped = errs.Unavailable("the writer is stopped")

func (s *Writer) isStopping() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.stopping
}

// Stop refuses new work with UNAVAILABLE, waits until everything accepted
// before it has committed, and releases the persistence.Writer. When ctx
// ends first, the drain is abandoned: what is still queued is answered
// UNAVAILABLE (and async records among it are lost, which the error
// reports). Stop may be called more than once; every call returns the
// first drain's outcome.
func (s *Writer) Stop(ctx context.Context) error {
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
func (s *Writer) closed(lost int) {
	if lost > 0 {
		s.stopErr = errs.Unavailable("writer stopped; %d accepted async records were not stored", lost)
	}
	close(s.drained)
}

func (s *Writer) String() string { return fmt.Sprintf("writer.Writer(%s)", s.pid) }
