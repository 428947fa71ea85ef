package session

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/writer"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// DirectoryName is the name the sessions directory is spawned under; remote
// Proto.Actor senders address it as actor.NewPID(address, DirectoryName).
const DirectoryName = "sessions"

// Service is the sessions service of one process: the sessions directory,
// the session actors it spawns, and the façade that implements
// sessionv1.SessionServiceServer on top of them.
type Service struct {
	sessionv1.UnimplementedSessionServiceServer

	sys   *actor.ActorSystem
	env   *env
	wr    *writer.Writer
	admit *directory.Admission
	pid   *actor.PID
	// live reaches live session owners without the directory's mailbox.
	live directory.LiveOwners

	closing atomic.Bool
	// stopSweep ends the sweeper of abandoned imports (importstream.go).
	stopSweep chan struct{}
	// firstSweep is closed once the sweeper's pass at start has ended: a
	// sweep that runs meanwhile races it for the same staged sessions
	// (each activation fences the other's discard).
	firstSweep chan struct{}
	stopOnce   sync.Once
	stopErr    error
}

// env is what every session owner shares. It is read-only after Start,
// except for the counters.
type env struct {
	cfg    Config
	reader persistence.Reader
	// owners is the owner actors' spec: the writer, the idle timer, the
	// live and fenced counters.
	owners *directory.OwnerSpec

	// afterAccept, when set (by tests, before the first request), is
	// called on the session actor's goroutine after a request arrived,
	// with the requests waiting (itself included) and whether a write was
	// in flight. It must not block.
	afterAccept func(sessionID string, queued int, inFlight bool)
}

// Start spawns the sessions directory (named Config.Name, by default
// DirectoryName) on sys. Writes
// go to wr's actor; reads run on reader, which must read the same
// store the writer writes.
func Start(sys *actor.ActorSystem, wr *writer.Writer, reader persistence.Reader, cfg Config) (*Service, error) {
	if sys == nil || wr == nil || reader == nil {
		return nil, errs.InvalidArgument("session.Start needs an actor system, an audit service and a reader")
	}
	s := &Service{sys: sys, wr: wr, env: &env{cfg: cfg.withDefaults(), reader: reader}}
	e := s.env
	e.owners = directory.NewOwnerSpec("session", wr, e.cfg.IdleTimeout, e.cfg.AskTimeout, s.refuseStopping, routeKey, s.unkeyed,
		func(id string) directory.Domain { return newOwner(id, e) })
	s.admit = e.owners.Admission
	e.owners.Arrived = func(id string, waiting int, inFlight bool) {
		if f := e.afterAccept; f != nil {
			f(id, waiting, inFlight)
		}
	}
	pid, err := sys.Root.SpawnNamed(e.owners.DirectoryProps(&s.live, s.env.cfg.MaxLive), s.env.cfg.Name)
	if err != nil {
		return nil, errs.Internal("spawning the %q directory: %v", s.env.cfg.Name, err)
	}
	s.pid = pid
	s.stopSweep, s.firstSweep = make(chan struct{}), make(chan struct{})
	go s.sweeper(s.stopSweep)
	if s.env.cfg.ExpirySweepInterval > 0 {
		go s.expirySweeper(s.stopSweep)
	}
	return s, nil
}

// refuseStopping is the error of a request the stopping service refuses.
func (s *Service) refuseStopping() error {
	if s.closing.Load() {
		return errUnavailableStopping()
	}
	return nil
}

// PID is the sessions directory. Remote Proto.Actor senders send it bare
// sessionv1 requests (with RequestFuture or a sender PID) and get the
// response message or a *commonv1.Error.
func (s *Service) PID() *actor.PID { return s.pid }

// PassivateAll asks every live session actor to passivate. It returns at
// once; actors stop after their writes in flight.
func (s *Service) PassivateAll() { s.sys.Root.Send(s.pid, &directory.PassivateAll{}) }

// ClusterProps are the props of the session owner as a cluster kind (see
// package placement and directory.OwnerSpec.KindProps): the same owner as
// a directory's child, learning its session id from *cluster.ClusterInit,
// accepting bare sessionv1 requests from any sender (admitted like every
// request, answered with the response or a *commonv1.Error), and
// passivating itself when idle.
func (s *Service) ClusterProps() *actor.Props { return s.env.owners.KindProps() }

// FencedActivations is how many session activations found a newer one
// had taken their session (the store fenced their write; they answered
// UNAVAILABLE and stopped). Expected after a member rejoins; a steady
// rise means members disagree about placement.
func (s *Service) FencedActivations() int64 { return s.env.owners.Fenced.Load() }

// ActiveActors is the number of session actors alive now (started and not
// yet stopped).
func (s *Service) ActiveActors() int { return s.env.owners.Live.Count() }

// WaitPassivated returns once no session actor is alive, or with ctx's
// error when it ends first.
func (s *Service) WaitPassivated(ctx context.Context) error { return s.env.owners.Live.WaitNone(ctx) }

// Stop refuses new requests, passivates every session actor (each finishes
// and answers its writes in flight), then stops the directory. Requests
// still waiting when ctx ends are answered UNAVAILABLE. Calling Stop again
// returns the first call's result.
func (s *Service) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.closing.Store(true)
		close(s.stopSweep)
		for {
			changed := s.env.owners.Live.Changed() // before count: no change is missed
			if s.env.owners.Live.Count() == 0 {
				break
			}
			s.PassivateAll() // again each time: a buffered request may have respawned one
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				s.stopErr = errs.Unavailable("stopping sessions: %v", ctx.Err())
			}
			break
		}
		// Poisoning stops whatever owner remains (answering its
		// requests UNAVAILABLE) with the directory.
		if err := s.sys.Root.PoisonFuture(s.pid).Wait(); err != nil && s.stopErr == nil {
			s.stopErr = errs.Unavailable("stopping the sessions directory: %v", err)
		}
		// The owners are not the directory's children: it stopped them
		// as it stopped, and each stops at once (nothing is awaited),
		// unless it is inside a store read, which AskTimeout bounds.
		wctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.AskTimeout)
		defer cancel()
		if err := s.WaitPassivated(wctx); err != nil && s.stopErr == nil {
			s.stopErr = errs.Unavailable("stopping the session actors: %v", err)
		}
	})
	return s.stopErr
}

// routeKey routes writes to the session's actor. A create without an id
// gets its new ULID here, so that it has an owner: the directory owns the
// request message once it was sent. Reads and imports are not about a live
// owner and run on the Unkeyed handler.
func routeKey(msg proto.Message) (string, bool, error) {
	var id string
	switch m := msg.(type) {
	case *sessionv1.CreateSessionRequest:
		if m.SessionId == "" {
			m.SessionId = ids.New()
		}
		id = m.SessionId
	case *sessionv1.CloseSessionRequest, *sessionv1.DeleteSessionRequest, *sessionv1.AppendRequest,
		*sessionv1.UpdateTokenUsageRequest, *sessionv1.LinkPlanRequest, *sessionv1.UpdateStateRequest,
		*sessionv1.TruncateRequest, *sessionv1.PutSnapshotRequest, *sessionv1.DeleteSnapshotRequest,
		*sessionv1.SetExpiryRequest:
		id = m.(interface{ GetSessionId() string }).GetSessionId()
	default:
		return "", false, nil
	}
	if err := ids.Check("session_id", id); err != nil {
		return "", false, err
	}
	return id, true, nil
}

// normalize validates a request that reached a session actor without the
// façade.
func normalize(msg proto.Message, cfg Config) (proto.Message, error) {
	switch m := msg.(type) {
	case *sessionv1.CreateSessionRequest:
		return normalizeCreate(m, cfg)
	case *sessionv1.AppendRequest:
		return normalizeAppend(m, cfg)
	case *sessionv1.UpdateTokenUsageRequest:
		return m, checkTokenUsage(m)
	case *sessionv1.LinkPlanRequest:
		return normalizeLink(m)
	case *sessionv1.UpdateStateRequest:
		return normalizeUpdateState(m)
	case *sessionv1.TruncateRequest:
		return normalizeTruncate(m)
	case *sessionv1.PutSnapshotRequest:
		return normalizePutSnapshot(m)
	case *sessionv1.DeleteSnapshotRequest:
		return normalizeDeleteSnapshot(m)
	case *sessionv1.SetExpiryRequest:
		return normalizeSetExpiry(m)
	case *sessionv1.CloseSessionRequest, *sessionv1.DeleteSessionRequest:
		return m, nil // routeKey checked the id, the only field
	}
	return nil, errs.InvalidArgument("a session actor cannot serve %T", msg)
}

// unkeyed serves, for remote and future senders, what needs no owner:
// reads (on the reader) and imports (through the writer).
func (s *Service) unkeyed(c *directory.Call) {
	ctx, cancel := context.WithTimeout(context.Background(), s.env.cfg.AskTimeout)
	defer cancel()
	var (
		resp proto.Message
		err  error
	)
	switch m := c.Msg.(type) {
	case *sessionv1.GetSessionRequest:
		resp, err = s.get(ctx, m)
	case *sessionv1.ListSessionsRequest:
		resp, err = s.list(ctx, m)
	case *sessionv1.ListMessagesRequest:
		resp, err = s.listMessages(ctx, m)
	case *sessionv1.ExportSessionRequest:
		resp, err = s.export(ctx, m)
	case *sessionv1.ImportSessionRequest:
		resp, err = s.importSession(ctx, m)
	case *sessionv1.GetStateRequest:
		resp, err = s.getState(ctx, m)
	case *sessionv1.GetSnapshotRequest:
		resp, err = s.getSnapshot(ctx, m)
	case *sessionv1.GetItemRequest:
		resp, err = s.GetItem(ctx, m)
	case *sessionv1.ListItemsRequest:
		resp, err = s.ListItems(ctx, m)
	default:
		err = errs.InvalidArgument("the sessions service cannot serve %T", c.Msg)
	}
	c.Replier.Reply(resp, err)
}

// call admits a normalised write (directory.Admission: in-process callers
// wait, network callers are refused when the backlog is full), hands it to
// its session owner — directly when it is live, else through the
// directory — and waits for the answer, at most AskTimeout. It allocates
// no context of its own on the common path (a deadline context costs a
// timer, a channel and a cancel func per append).
func call[T proto.Message](ctx context.Context, s *Service, key string, msg proto.Message) (T, error) {
	var zero T
	size := writer.RequestSize(msg)
	if err := s.admit.Admit(ctx, size); err != nil {
		return zero, err
	}
	// The room is held until the owner answers, also when ctx ends first.
	r := s.admit.Answered(size)
	directory.Send(s.sys.Root, s.pid, &s.live, key, &directory.Call{Msg: msg, Replier: r, Checked: true})
	timeout := askTimers.Get().(*time.Timer)
	timeout.Reset(s.env.cfg.AskTimeout)
	defer func() {
		// Since Go 1.23 a stopped timer's channel never yields a stale
		// value, so a stopped timer can be reused as is.
		timeout.Stop()
		askTimers.Put(timeout)
	}()
	select {
	case rep := <-r.C:
		if rep.Err != nil {
			return zero, rep.Err
		}
		return directory.Answer[T]("session", rep.Msg)
	case <-ctx.Done():
		return zero, noAnswer(ctx.Err())
	case <-timeout.C:
		return zero, noAnswer(context.DeadlineExceeded)
	}
}

// askTimers recycles the timers that bound calls: one per append would be
// a third of a call's allocations.
var askTimers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// noAnswer: the request may still be carried out, as with any network call
// (OUTCOME_UNKNOWN, not UNAVAILABLE, which promises nothing was stored); a
// retry with the same message ids is safe.
func noAnswer(cause error) error {
	return errs.OutcomeUnknown("no answer from the session actor: %v", cause)
}

func errUnavailableStopping() error { return errs.Unavailable("the sessions service is stopping") }
