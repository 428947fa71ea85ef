package directory

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/dispatch"
	"github.com/agentstate/agentstate/actors/lifecycle"
	"github.com/agentstate/agentstate/actors/writer"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/agentstate/agentstate/persistence"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
)

// Domain is one kind of owner: the kernel's Domain and the one I/O it
// needs besides writes, loading its committed state.
type Domain interface {
	lifecycle.Domain
	// Load reads the committed state (on the owner's goroutine; the
	// kernel asks for it after the activation and after a write that
	// left memory in doubt).
	Load() error
}

// OwnerSpec is what the owner actors of one kind share. It is read-only
// once the first owner started, except for its counters.
type OwnerSpec struct {
	// Kind names the owners ("session", "plan").
	Kind string
	// New makes the domain of the owner of id.
	New func(id string) Domain
	// Writer is the group-commit writer's actor.
	Writer *actor.PID
	// IdleTimeout is the owner's idle tick (see lifecycle.Kernel.Tick);
	// zero or negative: never passivated for idleness.
	IdleTimeout time.Duration
	// Key, Unkeyed and Admission serve a cluster kind's bare requests as
	// a directory serves its own (Config).
	Key       func(msg proto.Message) (key string, routed bool, err error)
	Unkeyed   func(c *Call)
	Admission *Admission
	// Arrived, when set (tests), runs on the owner's goroutine after a
	// request arrived, with what waits and whether a write is in flight.
	Arrived func(id string, waiting int, inFlight bool)

	// Live counts live owners; Activations counts the owners started,
	// Fenced the activations that were fenced.
	Live        LiveCount
	Activations atomic.Int64
	Fenced      atomic.Int64
}

// NewOwnerSpec returns the spec of the owners of kind, each made by
// newDomain: they write through wr, passivate after idle, and serve bare
// requests keyed by key (unkeyed ones by unkeyed), admitted against wr's
// backlog for at most maxWait and refused with closing's error once it
// reports one (the service is stopping).
func NewOwnerSpec(kind string, wr *writer.Writer, idle, maxWait time.Duration, closing func() error,
	key func(msg proto.Message) (string, bool, error), unkeyed func(c *Call), newDomain func(id string) Domain) *OwnerSpec {
	return &OwnerSpec{Kind: kind, New: newDomain, Writer: wr.PID(), IdleTimeout: idle, Key: key, Unkeyed: unkeyed,
		Admission: &Admission{Backlog: wr.Backlog(), MaxWait: maxWait, Closing: closing}}
}

// OwnerProps are the props of the owner of key, spawned and watched by
// the directory dir.
func (s *OwnerSpec) OwnerProps(key string, dir *actor.PID) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &shell{spec: s, id: key, dir: dir} })
}

// DirectoryProps are the props of the directory of these owners (live
// reaches them without its mailbox). The directory and its owners run on
// the shared pool, where bursts keep grown stacks.
func (s *OwnerSpec) DirectoryProps(live *LiveOwners, maxOwners int) *actor.Props {
	return Props(Config{Kind: s.Kind, Key: s.Key, Unkeyed: s.Unkeyed, Admission: s.Admission, Live: live, MaxOwners: maxOwners,
		Owner: func(key string, dir *actor.PID) *actor.Props {
			return s.OwnerProps(key, dir).Configure(actor.WithDispatcher(dispatch.Shared()))
		}}).Configure(actor.WithDispatcher(dispatch.Shared()))
}

// KindProps are the props of the owner as a cluster kind: it learns its
// id from *cluster.ClusterInit, accepts bare requests from any sender
// (admitted, answered with the response or a *commonv1.Error), stops
// itself when idle (it has no directory), and moves out, rather than
// stopping at once, when the cluster poisons it.
func (s *OwnerSpec) KindProps() *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &shell{spec: s, standalone: true} },
		actor.WithReceiverMiddleware(poisonAsMoveOut))
}

// shell is the actor around one lifecycle.Kernel: it turns messages into
// the kernel's events and the kernel's Ready into Proto.Actor calls. It
// decides nothing.
type shell struct {
	spec       *OwnerSpec
	id         string
	dir        *actor.PID // the directory (nil for a cluster kind)
	standalone bool

	k        *lifecycle.Kernel
	d        Domain
	idle     *time.Timer
	hold     *time.Timer // the commit window's (lifecycle.Ready.Hold)
	sent     time.Time   // when the write in flight was submitted
	stopping bool        // ctx.Stop was called: the idle timer stays stopped
	gone     bool        // Stopped or Restarting seen
}

// idleTick is the owner's own idle timer firing. Proto.Actor's receive
// timeout is not used: its timer races under the race detector when it
// is short and re-armed from the actor (issue 15).
type idleTick struct{}

// windowClosed is the timer of the commit window gen firing.
type windowClosed struct{ gen uint64 }

// moveOut is what a cluster kind's owner receives in place of a
// PoisonPill. The cluster poisons an activation when a topology change
// gives its identity to another member (and when the member leaves). A
// poisoned actor would stop at once: a write it handed to the writer
// still commits, but its caller could only be told "stopped", which a
// router retries as "nothing stored". So the owner moves out instead
// (lifecycle.Kernel.MoveOut).
type moveOut struct{}

func poisonAsMoveOut(next actor.ReceiverFunc) actor.ReceiverFunc {
	return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
		if _, ok := env.Message.(*actor.PoisonPill); ok {
			env = &actor.MessageEnvelope{Header: env.Header, Message: moveOut{}, Sender: env.Sender}
		}
		next(c, env)
	}
}

func (s *shell) start(ctx actor.Context) {
	if s.k != nil {
		return
	}
	s.spec.Activations.Add(1)
	s.d = s.spec.New(s.id)
	s.k = lifecycle.New(s.d)
	if t := s.spec.IdleTimeout; t > 0 {
		root, self := ctx.ActorSystem().Root, ctx.Self()
		s.idle = time.AfterFunc(t, func() { root.Send(self, idleTick{}) })
	}
}

func (s *shell) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.spec.Live.add(1)
		if !s.standalone {
			s.start(ctx)
		}
		return
	case *cluster.ClusterInit:
		if m.Identity != nil {
			s.id = m.Identity.Identity
		}
		s.start(ctx)
		return
	case *actor.Stopped, *actor.Restarting:
		// This incarnation ends: whoever waits on it gets an answer.
		s.stopTimers()
		if s.k != nil {
			s.k.Stopped()
			s.deliver(ctx, s.k.Ready())
		}
		if !s.gone {
			s.gone = true
			s.spec.Live.add(-1)
		}
		return
	}
	if s.k == nil {
		s.start(ctx) // a request before ClusterInit: the id is all we lack
	}
	switch m := ctx.Message().(type) {
	case *Call:
		s.arrive(m.Msg, m.Replier, m.Checked, m.Principal)
	case *writer.Applied:
		s.k.Applied(m.Tag, m.Result, time.Since(s.sent))
	case *actor.DeadLetterResponse:
		// A Submit reached no actor: the writer is gone, so the write
		// in flight can never be answered. (The only other request an
		// owner makes, Idle to its directory, expects no answer.)
		if tag := s.k.InFlight(); tag != 0 {
			s.k.Applied(tag, writerGone(s.spec.Kind, s.id), time.Since(s.sent))
		}
	case idleTick:
		s.k.Tick()
		if !s.stopping {
			s.idle.Reset(s.spec.IdleTimeout)
		}
	case windowClosed:
		s.k.WindowClosed(m.gen)
	case *Passivate:
		s.k.Passivate()
	case moveOut:
		s.k.MoveOut()
	case proto.Message:
		if !s.standalone {
			return // a directory wraps requests in a *Call
		}
		s.acceptBare(ctx, m)
	default:
		return
	}
	s.drive(ctx)
}

func (s *shell) arrive(msg proto.Message, r lifecycle.Replier, checked bool, who string) {
	// What the hook sees is the queue as this request joins it: itself
	// and what waits before it, and whether a write was in flight then.
	waiting, inFlight := s.k.Waiting()+1, s.k.InFlight() != 0
	s.k.Arrive(&lifecycle.Request{Msg: msg, Replier: r, Checked: checked, Principal: who})
	if f := s.spec.Arrived; f != nil {
		f(s.id, waiting, inFlight)
	}
}

// drive carries out the kernel's effects until it needs an answer from
// outside (a write's result, a message).
func (s *shell) drive(ctx actor.Context) {
	for {
		rd := s.k.Ready()
		s.deliver(ctx, rd)
		switch {
		case rd.Load:
			s.k.Loaded(s.d.Load())
			continue
		case rd.AskPassivation && s.standalone:
			// No directory: stop once nothing is held. The cluster
			// forgets this activation as it stops; a later request
			// activates a fresh one, which takes a new epoch.
			s.k.Passivate()
			continue
		case rd.AskPassivation:
			// Request, not Send: the directory knows its owners by
			// sender, and a stale Idle must not passivate a successor.
			ctx.Request(s.dir, &Idle{})
		case rd.Stop:
			s.stopTimers()
			ctx.Stop(ctx.Self())
		}
		return
	}
}

func (s *shell) deliver(ctx actor.Context, rd lifecycle.Ready) {
	for _, r := range rd.Replies {
		r.Req.Replier.Reply(r.Msg, r.Err)
	}
	if rd.Fenced {
		s.spec.Fenced.Add(1)
	}
	if w := rd.Submit; w != nil {
		s.sent = time.Now()
		ctx.Request(s.spec.Writer, &writer.Submit{Cmd: w.Cmd, Tag: w.Tag})
	}
	if h := rd.Hold; h.For > 0 && !s.stopping {
		// One window is open at a time; the timer of an earlier one
		// that closed early is stopped, and would be ignored (stale gen).
		if s.hold != nil {
			s.hold.Stop()
		}
		root, self, gen := ctx.ActorSystem().Root, ctx.Self(), h.Gen
		s.hold = time.AfterFunc(h.For, func() { root.Send(self, windowClosed{gen: gen}) })
	}
}

// stopTimers stops the idle and window timers for good: the owner stops.
func (s *shell) stopTimers() {
	s.stopping = true
	if s.idle != nil {
		s.idle.Stop()
	}
	if s.hold != nil {
		s.hold.Stop()
	}
}

// acceptBare takes a bare request from a remote or future sender, as the
// directory does for its own such senders.
func (s *shell) acceptBare(ctx actor.Context, m proto.Message) {
	r, ok := s.spec.Admission.bare(ctx, m)
	if !ok {
		return
	}
	// A member forwarding a request names its principal (principal.Header).
	who := principal.OrRemote(ctx.MessageHeader().Get(principal.Header))
	id, routed, err := s.spec.Key(m)
	switch {
	case err != nil:
		r.Reply(nil, err)
	case !routed:
		// Reads and imports need no owner: served as the directory
		// serves them, so a request works the same whichever way it
		// reached the node.
		go s.spec.Unkeyed(&Call{Msg: m, Replier: r, Principal: who})
	case id != s.id:
		// The identity is the owner's id: a write naming another one
		// reached the wrong actor.
		r.Reply(nil, errs.InvalidArgument("%s actor %s cannot serve %s for %s %q: send it to that %s's identity",
			s.spec.Kind, s.id, m.ProtoReflect().Descriptor().Name(), s.spec.Kind, id, s.spec.Kind))
	default:
		s.arrive(m, r, false, who)
	}
}

// LiveCount counts live owners and signals every change, so that a
// Service's Stop and tests wait for passivation without polling.
type LiveCount struct {
	mu sync.Mutex
	n  int
	ch chan struct{} // closed and replaced on every change
}

func (l *LiveCount) add(d int) {
	l.mu.Lock()
	l.n += d
	if l.ch != nil {
		close(l.ch)
		l.ch = nil
	}
	l.mu.Unlock()
}

// Count is the number of live owners.
func (l *LiveCount) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// Changed returns a channel closed at the next change.
func (l *LiveCount) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ch == nil {
		l.ch = make(chan struct{})
	}
	return l.ch
}

func writerGone(kind, id string) persistence.Result {
	return persistence.Result{Err: errs.Unavailable("%s %s: the writer is not running", kind, id)}
}

// WaitNone returns once no owner is live, or with ctx's error when it ends
// first.
func (l *LiveCount) WaitNone(ctx context.Context) error {
	for {
		changed := l.Changed() // before Count: no change is missed
		if l.Count() == 0 {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
