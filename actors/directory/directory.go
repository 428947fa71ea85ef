package directory

import (
	"time"

	"github.com/agentstate/agentstate/messages/errs"
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// DefaultIdleTimeout is how long an owner stays alive without messages.
const DefaultIdleTimeout = 5 * time.Minute

// DefaultMaxOwners is the live owners of one kind a service keeps by
// default (Config.MaxOwners). A live session actor costs about 10-15 KiB
// of resident memory under load at the node's GC target (41,724 live at
// once: 596 MiB), and what a node keeps after passivation grows with the
// most it had live (the runtime's metadata of its largest heap, partly
// used spans), so 20,000 keep a burst near 300 MiB and an idle node after
// 1,000,000 sessions within 2× of one after 10,000 (docs/BENCHMARKS.md).
const DefaultMaxOwners = 20_000

// DefaultAskTimeout is how long an owner service's façade waits for an
// answer by default.
const DefaultAskTimeout = 30 * time.Second

// ServiceDefaults fills in the settings every owner service's Config
// shares: the idle timeout (0: DefaultIdleTimeout; negative stays, never
// idle), the ask timeout (not positive: DefaultAskTimeout), the most live
// owners (0: DefaultMaxOwners) and the directory's name ("": name).
func ServiceDefaults(idle, ask *time.Duration, maxLive *int, dirName *string, name string) {
	if *idle == 0 {
		*idle = DefaultIdleTimeout
	}
	if *ask <= 0 {
		*ask = DefaultAskTimeout
	}
	if *maxLive == 0 {
		*maxLive = DefaultMaxOwners
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
	// Owner makes the props of the owner of key; dir is the directory,
	// to which the owner sends Idle.
	Owner func(key string, dir *actor.PID) *actor.Props
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
	// MaxOwners, when positive, bounds the live owners that are not
	// passivating: spawning one more passivates the oldest-spawned first
	// (it finishes its work in flight; a later request activates it
	// again). It bounds the memory of a burst of activations, which the
	// idle timeout alone bounds only by time.
	MaxOwners int
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

// PassivateKeys makes the directory passivate the live owners of these
// keys (a group's delete: their owners must not answer from what they
// hold of the deleted sessions). A request is answered (nil) once they
// are withdrawn from callers: every call made after the answer reaches a
// new owner.
type PassivateKeys struct{ Keys []string }

// CountOwners asks for the number of live owners; the reply is an int.
type CountOwners struct{}

type ownerState struct {
	key      string
	pid      *actor.PID
	stopping bool
	buffered []*Call
}

// directory spawns its owners from the actor system's root and watches
// them, rather than as its children: Proto.Actor's set of children keeps,
// past its length, the PIDs of children that stopped, and a PID keeps its
// stopped actor reachable (its whole state) until the slot is reused, so a
// burst of N live owners would hold up to N dead ones after passivation.
// A watched owner reports Terminated as a child does; when the directory
// stops it stops the owners still alive.
//
// Invariant: owners and byPID hold the live (and stopping) owners only;
// Go maps keep their largest size, so both are rebuilt when they fell
// to a quarter of the size they had (compact), which bounds what an idle
// directory holds by what is live, not by the largest burst it saw.
type directory struct {
	cfg    Config
	owners map[string]*ownerState
	byPID  map[string]string // pid.Id -> key
	peak   int               // len(owners) when the maps were last rebuilt, or their largest since
	// active counts the owners not stopping; spawned lists owners in
	// spawn order from its index head for MaxOwners (entries of owners
	// that stopped since are skipped, and dropped by compact).
	active  int
	spawned []*ownerState
	head    int
}

// compactMin is the map size below which the directory never rebuilds its
// maps (a rebuild costs a copy; a small map costs little).
const compactMin = 1024

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
	case *PassivateKeys:
		for _, key := range m.Keys {
			if o := d.owners[key]; o != nil && !o.stopping {
				d.stop(ctx, key, o)
			}
		}
		if ctx.Sender() != nil {
			ctx.Respond(nil)
		}
	case *CountOwners:
		ctx.Respond(len(d.owners))
	case *actor.Stopping, *actor.Restarting:
		// The owners are not children: they stop with the directory
		// here, withdrawn from callers first (as a passivation), their
		// waiting requests answered by their own Stopped.
		for key, o := range d.owners {
			if d.cfg.Live != nil {
				d.cfg.Live.close(key, o.pid)
			}
			ctx.Stop(o.pid)
		}
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
	self := ctx.Self()
	pid := ctx.ActorSystem().Root.SpawnPrefix(d.cfg.Owner(key, self), self.Id+"/")
	// Watch is a system message: the owner takes it before any request,
	// and a watch of an owner already gone is answered Terminated.
	ctx.Watch(pid)
	o := &ownerState{key: key, pid: pid}
	d.owners[key] = o
	d.byPID[pid.Id] = key
	d.peak = max(d.peak, len(d.owners))
	d.active++
	if d.cfg.MaxOwners > 0 {
		d.spawned = append(d.spawned, o)
		d.evict(ctx)
		if len(d.spawned)-d.head > 2*d.active+compactMin {
			d.prune() // owners passivated for idleness meanwhile
		}
	}
	return o
}

// evict passivates the oldest-spawned owners while more than MaxOwners
// are active. The newest is never among them (MaxOwners ≥ 1).
func (d *directory) evict(ctx actor.Context) {
	for d.active > d.cfg.MaxOwners && d.head < len(d.spawned) {
		o := d.spawned[d.head]
		d.spawned[d.head] = nil
		d.head++
		if !o.stopping && d.owners[o.key] == o {
			d.stop(ctx, o.key, o)
		}
	}
	if d.head > len(d.spawned)/2 {
		d.prune()
	}
}

// compact rebuilds the maps at their present size once they fell to a
// quarter of their largest (see directory's invariant).
func (d *directory) compact() {
	if d.peak < compactMin || len(d.owners) > d.peak/4 {
		return
	}
	owners := make(map[string]*ownerState, len(d.owners))
	byPID := make(map[string]string, len(d.byPID))
	for k, o := range d.owners {
		owners[k] = o
	}
	for id, k := range d.byPID {
		byPID[id] = k
	}
	d.owners, d.byPID, d.peak = owners, byPID, len(owners)
	d.prune()
}

// prune drops from spawned the owners that are stopping or gone: they
// keep their stopped actors reachable through their PIDs.
func (d *directory) prune() {
	var spawned []*ownerState
	for _, o := range d.spawned[d.head:] {
		if !o.stopping && d.owners[o.key] == o {
			spawned = append(spawned, o)
		}
	}
	d.spawned, d.head = spawned, 0
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
	d.active--
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
	if !o.stopping {
		d.active-- // stopped without passivation
	}
	if d.cfg.Live != nil {
		d.cfg.Live.close(key, o.pid) // stopped without passivation
	}
	if len(o.buffered) == 0 {
		d.compact()
		return
	}
	// Only now, with the old owner gone, may a new one load the key.
	n := d.spawn(ctx, key)
	for _, c := range o.buffered {
		ctx.Send(n.pid, c)
	}
	d.publish(key, n)
}
