package directory

import (
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// DefaultIdleTimeout is how long an owner stays alive without messages.
const DefaultIdleTimeout = 5 * time.Minute

// DefaultAskTimeout is how long an owner service's façade waits for an
// answer by default.
const DefaultAskTimeout = 30 * time.Second

// ServiceDefaults fills in the settings every owner service's Config
// shares: the idle timeout (0: DefaultIdleTimeout; negative stays, never
// idle), the ask timeout (not positive: DefaultAskTimeout) and the
// directory's name ("": name).
func ServiceDefaults(idle, ask *time.Duration, dirName *string, name string) {
	if *idle == 0 {
		*idle = DefaultIdleTimeout
	}
	if *ask <= 0 {
		*ask = DefaultAskTimeout
	}
	if *dirName == "" {
		*dirName = name
	}
}

// Config describes one kind of owner.
type Config struct {
	// Kind names the owners ("session", "plan") in errors.
	Kind string
	// Key returns the owner key of a request. routed=false sends the
	// request to Unkeyed; a non-nil err is the reply (a malformed id).
	Key func(msg proto.Message) (key string, routed bool, err error)
	// Owner makes the props of the owner of key.
	Owner func(key string) *actor.Props
	// Unkeyed serves requests that are about no single owner. It runs on
	// its own goroutine and must reply through c.Replier.
	Unkeyed func(c *Call)
	// Admission, when set, admits every request from a remote or future
	// sender (without waiting: an error such as RESOURCE_EXHAUSTED is the
	// reply) until it is answered.
	Admission *Admission
	// Live, when set, is where the directory publishes its live owners
	// for callers to reach them directly (LiveOwners).
	Live *LiveOwners
}

// Idle is sent by an owner to its directory, with ctx.Request so that the
// directory sees who is idle, when it has been idle for the idle timeout.
// An Idle without a sender is ignored.
type Idle struct{}

// Passivate tells an owner to stop once nothing is in flight.
type Passivate struct{}

// PassivateAll makes the directory passivate every live owner (tests and
// operations use it to force reloads).
type PassivateAll struct{}

// CountOwners asks for the number of live owners; the reply is an int.
type CountOwners struct{}

type ownerState struct {
	pid      *actor.PID
	stopping bool
	buffered []*Call
}

type directory struct {
	cfg    Config
	owners map[string]*ownerState
	byPID  map[string]string // pid.Id -> key
}

// Props returns the props of a directory actor for cfg.
func Props(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &directory{cfg: cfg, owners: map[string]*ownerState{}, byPID: map[string]string{}}
	})
}

func (d *directory) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Call:
		d.route(ctx, m)
	case *Idle:
		d.passivate(ctx, ctx.Sender())
	case *PassivateAll:
		for key, o := range d.owners {
			if !o.stopping {
				d.stop(ctx, key, o)
			}
		}
	case *CountOwners:
		ctx.Respond(len(d.owners))
	case *actor.Terminated:
		d.terminated(ctx, m.Who)
	case proto.Message:
		// A bare protobuf request from a remote or future sender.
		if r, ok := d.cfg.Admission.bare(ctx, m); ok {
			d.route(ctx, &Call{Msg: m, Replier: r})
		}
	}
}

func (d *directory) route(ctx actor.Context, c *Call) {
	key, routed, err := d.cfg.Key(c.Msg)
	if err != nil {
		c.Replier.Reply(nil, err)
		return
	}
	if !routed {
		if d.cfg.Unkeyed == nil {
			c.Replier.Reply(nil, errs.InvalidArgument("%s directory cannot serve %T", d.cfg.Kind, c.Msg))
			return
		}
		go d.cfg.Unkeyed(c)
		return
	}
	o := d.owners[key]
	if o == nil {
		o = d.spawn(ctx, key)
		ctx.Send(o.pid, c)
		d.publish(key, o)
		return
	}
	if o.stopping {
		o.buffered = append(o.buffered, c)
		return
	}
	ctx.Send(o.pid, c)
}

func (d *directory) spawn(ctx actor.Context, key string) *ownerState {
	pid := ctx.Spawn(d.cfg.Owner(key))
	o := &ownerState{pid: pid}
	d.owners[key] = o
	d.byPID[pid.Id] = key
	return o
}

// publish lets callers reach o directly (after the requests the directory
// holds for it were sent: they came first).
func (d *directory) publish(key string, o *ownerState) {
	if d.cfg.Live != nil {
		d.cfg.Live.open(key, o.pid)
	}
}

// stop passivates o: withdrawn from callers first, so that every request
// sent to it directly is in its mailbox before Passivate (LiveOwners).
func (d *directory) stop(ctx actor.Context, key string, o *ownerState) {
	o.stopping = true
	if d.cfg.Live != nil {
		d.cfg.Live.close(key, o.pid)
	}
	ctx.Send(o.pid, &Passivate{})
}

func (d *directory) passivate(ctx actor.Context, who *actor.PID) {
	if who == nil {
		return
	}
	key, ok := d.byPID[who.Id]
	if !ok {
		return
	}
	o := d.owners[key]
	if o.stopping {
		return
	}
	d.stop(ctx, key, o)
}

func (d *directory) terminated(ctx actor.Context, who *actor.PID) {
	key, ok := d.byPID[who.Id]
	if !ok {
		return
	}
	delete(d.byPID, who.Id)
	o := d.owners[key]
	delete(d.owners, key)
	if d.cfg.Live != nil {
		d.cfg.Live.close(key, o.pid) // stopped without passivation
	}
	if len(o.buffered) == 0 {
		return
	}
	// Only now, with the old owner gone, may a new one load the key.
	n := d.spawn(ctx, key)
	for _, c := range o.buffered {
		ctx.Send(n.pid, c)
	}
	d.publish(key, n)
}
