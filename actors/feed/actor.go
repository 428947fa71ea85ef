package feed

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	feedv1 "github.com/agentstate/agentstate/messages/agentstate/feed/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/ids"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// DefaultWindow is the events an actor subscriber may have unacknowledged
// when its request names no window; MaxWindow bounds what it may name.
const (
	DefaultWindow = 256
	MaxWindow     = 4096
)

// StartActor spawns the feed actor named name ("feed" if empty) on sys:
// the Proto.Actor interface of h. A PID (local or remote) sends it a
// TailSessionRequest or a TailChangesRequest; it answers Subscribed (or a
// commonv1.Error) and then sends the tail's events to that PID, each with
// the subscription id, at most window of them unacknowledged (the
// subscriber sends Ack as it processes them; Proto.Actor mailboxes are
// unbounded, so this is what bounds the subscriber's memory). It watches
// the subscriber and ends its subscriptions when it terminates, or on
// Unsubscribe; a failed read ends one with SubscriptionFailed.
func StartActor(sys *actor.ActorSystem, h *Hub, name string) (*actor.PID, error) {
	if name == "" {
		name = "feed"
	}
	props := actor.PropsFromProducer(func() actor.Actor {
		return &feedActor{h: h, subs: map[string]*actorSub{}, byPID: map[string]map[string]bool{}}
	})
	pid, err := sys.Root.SpawnNamed(props, name)
	if err != nil {
		return nil, errs.Internal("spawn the feed actor: %v", err)
	}
	return pid, nil
}

type feedActor struct {
	h     *Hub
	subs  map[string]*actorSub
	byPID map[string]map[string]bool // subscriber PID key → its subscription ids
}

// actorSub is one subscription served by a pump goroutine.
type actorSub struct {
	id     string
	to     *actor.PID
	cancel context.CancelFunc
	acked  atomic.Int64
	ackSig chan struct{} // capacity 1
}

// subOpened and subEnded are sent by a pump to the actor when its tail
// opened and when its subscription is over.
type (
	subOpened struct{ id string }
	subEnded  struct{ id string }
)

func pidKey(p *actor.PID) string { return p.GetAddress() + "/" + p.GetId() }

func (a *feedActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *feedv1.TailSessionRequest:
		a.subscribe(ctx, m, m.GetWindow())
	case *feedv1.TailChangesRequest:
		a.subscribe(ctx, m, m.GetWindow())
	case *feedv1.Ack:
		if s := a.subs[m.GetSubscriptionId()]; s != nil && m.GetEvents() > 0 {
			s.acked.Add(int64(m.GetEvents()))
			select {
			case s.ackSig <- struct{}{}:
			default:
			}
		}
	case *feedv1.Unsubscribe:
		a.drop(m.GetSubscriptionId())
	case *subOpened:
		a.watch(ctx, m.id)
	case *subEnded:
		a.drop(m.id)
	case *actor.Terminated:
		for id := range a.byPID[pidKey(m.GetWho())] {
			a.drop(id)
		}
	case actor.SystemMessage, actor.AutoReceiveMessage, actor.InfrastructureMessage:
	default:
		if s := ctx.Sender(); s != nil {
			ctx.Send(s, errs.ToProto(errs.InvalidArgument("the feed service cannot serve %T", m)))
		}
	}
}

func (a *feedActor) subscribe(ctx actor.Context, req proto.Message, window int32) {
	to := ctx.Sender()
	if to == nil {
		return // nobody to send the events to
	}
	switch {
	case window == 0:
		window = DefaultWindow
	case window < 0 || window > MaxWindow:
		ctx.Send(to, errs.ToProto(errs.InvalidArgument("window %d is outside 1..%d", window, MaxWindow)))
		return
	}
	pctx, cancel := context.WithCancel(context.Background())
	s := &actorSub{id: ids.New(), to: to, cancel: cancel, ackSig: make(chan struct{}, 1)}
	a.subs[s.id] = s
	root, self := ctx.ActorSystem().Root, ctx.Self()
	go func() {
		a.pump(pctx, root, self, s, req, int64(window))
		root.Send(self, &subEnded{id: s.id})
	}()
}

// watch starts watching a subscriber once its tail is open: not before,
// since a refused request may come from a future, which takes one message
// only. A subscriber that terminated meanwhile is reported Terminated at
// once by Proto.Actor, so the order costs nothing.
func (a *feedActor) watch(ctx actor.Context, id string) {
	s := a.subs[id]
	if s == nil {
		return
	}
	k := pidKey(s.to)
	if a.byPID[k] == nil {
		a.byPID[k] = map[string]bool{}
		ctx.Watch(s.to)
	}
	a.byPID[k][id] = true
}

func (a *feedActor) drop(id string) {
	s := a.subs[id]
	if s == nil {
		return
	}
	s.cancel()
	delete(a.subs, id)
	// The watch stays (the next subscription of the PID watches it again,
	// which Proto.Actor keeps as one): an Unwatch of a remote PID is a
	// remote send, and this version's remote races a send made by its
	// endpoint watcher against its own Shutdown.
	k := pidKey(s.to)
	if subs := a.byPID[k]; subs != nil {
		delete(subs, id)
		if len(subs) == 0 {
			delete(a.byPID, k)
		}
	}
}

// stamped is a tail's next as the pump takes it: the events as messages,
// each stamped with its subscription by stamp (the wrapper is this tail's
// own, so the tail's events can carry its id).
func stamped[E proto.Message](next func(context.Context) ([]E, error), stamp func(E)) func(context.Context) ([]proto.Message, error) {
	return func(ctx context.Context) ([]proto.Message, error) {
		evs, err := next(ctx)
		out := make([]proto.Message, len(evs))
		for i, ev := range evs {
			stamp(ev)
			out[i] = ev
		}
		return out, err
	}
}

// pump opens the tail and sends its events to the subscriber until the
// tail ends, fails or ctx is cancelled. It runs on its own goroutine: it
// waits on the store and on the subscriber's acknowledgements, never in
// the actor.
func (a *feedActor) pump(ctx context.Context, root *actor.RootContext, self *actor.PID, s *actorSub, req proto.Message, window int64) {
	var next func(context.Context) ([]proto.Message, error)
	var closeTail func()
	var err error
	switch r := req.(type) {
	case *feedv1.TailSessionRequest:
		var t *SessionTail
		if t, err = a.h.TailSession(ctx, r); err == nil {
			closeTail = t.Close
			next = stamped(t.Next, func(ev *feedv1.SessionEvent) { ev.SubscriptionId = s.id })
		}
	case *feedv1.TailChangesRequest:
		var t *ChangeTail
		if t, err = a.h.TailChanges(ctx, r); err == nil {
			closeTail = t.Close
			next = stamped(t.Next, func(ev *feedv1.ChangeEvent) { ev.SubscriptionId = s.id })
		}
	}
	if err != nil {
		root.Send(s.to, errs.ToProto(err))
		return
	}
	defer closeTail()
	root.Send(self, &subOpened{id: s.id})
	root.Send(s.to, &feedv1.Subscribed{SubscriptionId: s.id})
	var sent int64
	for {
		evs, err := next(ctx)
		if errors.Is(err, io.EOF) || ctx.Err() != nil {
			return
		}
		if err != nil {
			root.Send(s.to, &feedv1.SubscriptionFailed{SubscriptionId: s.id, Error: errs.ToProto(err)})
			return
		}
		for _, ev := range evs {
			for sent-s.acked.Load() >= window {
				select {
				case <-s.ackSig:
				case <-ctx.Done():
					return
				}
			}
			root.Send(s.to, ev)
			sent++
		}
	}
}
