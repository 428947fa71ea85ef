package placement

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/directory"
	"github.com/agentstate/agentstate/actors/plan"
	"github.com/agentstate/agentstate/actors/session"
	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"
)

// Defaults of RouterConfig and of a Member's cluster.
const (
	// DefaultAttemptTimeout bounds one attempt of a routed call. A
	// request to a member that just died is not failed by the library
	// when the endpoint goes; it waits this long, then the call fails
	// OUTCOME_UNKNOWN (it may have been applied) and the caller's retry,
	// if the request is idempotent, resolves the owner anew.
	DefaultAttemptTimeout = 750 * time.Millisecond
	// DefaultRequestTimeout is the cluster's own request timeout.
	DefaultRequestTimeout = 750 * time.Millisecond
	defaultBackoff        = 20 * time.Millisecond
	maxBackoff            = 250 * time.Millisecond
)

// RouterConfig tunes a Router. The zero value is usable.
type RouterConfig struct {
	// AttemptTimeout bounds one attempt (default DefaultAttemptTimeout).
	AttemptTimeout time.Duration
}

// Router carries writes to their owners through a cluster. It implements
// session.Router and plan.Router. Calls made before Bind fail with
// UNAVAILABLE (retried within the caller's deadline).
type Router struct {
	cfg     RouterConfig
	cluster atomic.Pointer[cluster.Cluster]
	topo    topologyWatch
	conns   endpointWatch
	// grpc maps the other members' remote addresses to the gRPC
	// addresses they published, for the owner hint (directory.NoteOwner).
	grpc    grpcAddrs
	retries atomic.Int64
	// membership, when set (etcd membership: Member.Membership), says
	// why this member's view of the cluster is in doubt. Its topology is
	// then frozen, so a retry would find the same owner: a call stops at
	// its first UNAVAILABLE attempt instead of retrying to its deadline.
	// Set before Bind publishes the cluster.
	membership func() string
}

var (
	_ session.Router   = (*Router)(nil)
	_ plan.Router      = (*Router)(nil)
	_ directory.Placer = (*Router)(nil)
)

// NewRouter returns a Router that is not yet bound to a cluster.
func NewRouter(cfg RouterConfig) *Router {
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultAttemptTimeout
	}
	return &Router{cfg: cfg}
}

// Bind makes r route through c, a started member. The kinds must be
// registered in c (Kinds). r follows c's membership from the next topology
// change on (StartMember has it follow from the start), so that an attempt
// that depends on a member stops waiting when that member leaves. It
// follows c's connections to other members from here on, which is why c
// must be started first (endpointWatch).
func (r *Router) Bind(c *cluster.Cluster) {
	r.topo.watch(c.ActorSystem.EventStream)
	r.conns.watch(c.ActorSystem.EventStream)
	r.grpc.watch(c.ActorSystem.EventStream)
	r.grpc.seed(c)
	r.cluster.Store(c)
}

// Local reports whether the cluster's owner lookup places id of kind on
// this member under the latest topology it saw (directory.Placer). It is
// the lookup's own rendezvous hash, so it agrees with where the next
// activation happens unless the membership changes meanwhile (then the
// request is simply forwarded).
func (r *Router) Local(kind, id string) bool {
	c, t := r.cluster.Load(), r.topo.load()
	if c == nil || t == nil {
		return false
	}
	return t.owners.GetByClusterIdentity(&cluster.ClusterIdentity{Kind: kind, Identity: id}) == c.ActorSystem.Address()
}

// Retries is the number of attempts retried so far (failover shows here).
func (r *Router) Retries() int64 { return r.retries.Load() }

// Route asks the kind's actor for id with msg. It retries, until ctx ends,
// only attempts known to have done nothing — those that failed UNAVAILABLE:
// the owner answered it (it was fenced or is stopping; such a write stored
// nothing), the owner could not be found in time, or msg was not delivered
// (dead letter). An attempt that sent msg and got no answer in time may
// have been applied, and so may one whose owner answered OUTCOME_UNKNOWN
// (the store lost COMMIT's answer): Route returns OUTCOME_UNKNOWN for the
// caller to decide, because retrying a request without a client-chosen id
// (RecordError) could store it twice. Any other answer is final. Each
// attempt sends a copy of msg, so a local owner never shares it with a
// retry. A final answer of an owner on another member notes that member's
// gRPC address in ctx's owner sink (directory.NoteOwner), for the caller's
// next requests to go there.
func (r *Router) Route(ctx context.Context, kind, id string, msg proto.Message) (proto.Message, error) {
	backoff := defaultBackoff
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			r.retries.Add(1)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, errs.Unavailable("%s %s: no answer before the deadline (%v); last: %v", kind, id, ctx.Err(), last)
			case <-t.C:
			}
			backoff = min(2*backoff, maxBackoff)
		}
		timeout := r.cfg.AttemptTimeout
		if dl, ok := ctx.Deadline(); ok {
			left := time.Until(dl)
			if left <= 0 {
				return nil, errs.Unavailable("%s %s: no answer before the deadline; last: %v", kind, id, last)
			}
			timeout = min(timeout, left)
		}
		resp, owner, err := r.attempt(kind, id, msg, principal.Of(ctx), timeout)
		if err == nil {
			r.noteOwner(ctx, owner)
			return resp, nil
		}
		if errs.CodeOf(err) != errs.UnavailableCode {
			r.noteOwner(ctx, owner)
			return nil, err
		}
		if r.membership != nil {
			if why := r.membership(); why != "" {
				return nil, errs.Unavailable("%s %s: %s; try another member (%v)", kind, id, why, err)
			}
		}
		last = err
	}
}

// attempt makes one cluster request. Failing before msg was sent (no
// cluster, no owner found, the owner's member gone, no connection to it
// open from the send to the failure: endpointWatch) or msg not delivered
// is UNAVAILABLE; msg sent and no answer is OUTCOME_UNKNOWN; an answered
// *commonv1.Error is the owner's. The whole attempt — finding the owner and
// its answer — ends at timeout, or as soon as the member it waits on
// leaves the topology: cluster.Request cannot promise either, because its
// owner lookup waits up to a hard-coded 5 s for a member that may just have
// died, and a request to a dead member is never failed before its timeout.
// owner is the remote address of the owner's member when that owner
// answered from another member ("" otherwise: local, or no answer).
func (r *Router) attempt(kind, id string, msg proto.Message, who string, timeout time.Duration) (resp proto.Message, owner string, err error) {
	c := r.cluster.Load()
	if c == nil {
		return nil, "", errs.Unavailable("the cluster is not started yet")
	}
	deadline := time.Now().Add(timeout)
	pid, err := resolve(c, kind, id, timeout, r.topo.load().changes())
	if err != nil {
		return nil, "", err
	}
	// A PID cached before its member left (the library drops a left
	// member's PIDs from its cache, but a lookup that was running then may
	// have put one back): nothing is sent, the next attempt looks it up anew.
	self := c.ActorSystem.Address()
	if t := r.topo.load(); pid.Address != self && !t.has(pid.Address) {
		c.PidCache.RemoveByValue(id, kind, pid)
		return nil, "", errs.Unavailable("%s %s: its owner's member %s left the cluster", kind, id, pid.Address)
	}
	sent := r.conns.mark(pid.Address)
	raw, err := r.await(c, pid, proto.Clone(msg), who, time.Until(deadline))
	if err != nil {
		// A dead or stopped activation: the next attempt looks the owner up anew.
		c.PidCache.RemoveByValue(id, kind, pid)
		undelivered := errors.Is(err, actor.ErrDeadLetter) || errors.Is(err, remote.ErrDeadLetter)
		if undelivered {
			return nil, "", errs.Unavailable("%s %s: %v", kind, id, err)
		}
		// The first request to a member that was just killed waits in a
		// new endpoint writer that cannot connect: it never left.
		if pid.Address != self && r.conns.neverSent(sent) {
			return nil, "", errs.Unavailable("%s %s: not sent, member %s has no connection open (%v)", kind, id, pid.Address, err)
		}
		if errors.Is(err, errMemberLeft) {
			return nil, "", errs.OutcomeUnknown("%s %s: %v; it may have been applied", kind, id, err)
		}
		return nil, "", errs.OutcomeUnknown("%s %s: no answer within %v, the request may have been applied: %v", kind, id, timeout, err)
	}
	if pid.Address != self {
		owner = pid.Address
	}
	switch m := raw.(type) {
	case *commonv1.Error:
		return nil, owner, errs.FromProto(m)
	case proto.Message:
		return m, owner, nil
	default:
		return nil, "", errs.OutcomeUnknown("%s %s: no answer (%T), the request may have been applied", kind, id, raw)
	}
}

// noteOwner notes the gRPC address of the member at remote (an owner's
// member other than this one; "" none) in ctx's owner sink.
func (r *Router) noteOwner(ctx context.Context, remote string) {
	if remote != "" {
		directory.NoteOwner(ctx, r.grpc.lookup(remote))
	}
}

// errMemberLeft fails a request in flight whose member left the cluster:
// no answer can come any more, but the member may have applied it first.
var errMemberLeft = errors.New("its member left the cluster with the request in flight")

// await sends msg to pid and waits for the answer, at most timeout, and
// only while pid's member (if remote) is in the topology: a request to a
// member that left is never answered, so waiting longer only delays the
// caller's retry. It fails with errMemberLeft then, else as the future does.
func (r *Router) await(c *cluster.Cluster, pid *actor.PID, msg proto.Message, who string, timeout time.Duration) (any, error) {
	type answer struct {
		msg any
		err error
	}
	local := pid.Address == c.ActorSystem.Address()
	t := r.topo.load()
	// RequestFuture sends no headers: the envelope names the request's
	// principal for the owner's audit entries (principal.Header).
	f := actor.NewFuture(c.ActorSystem, timeout)
	env := &actor.MessageEnvelope{Message: msg, Sender: f.PID()}
	env.SetHeader(principal.Header, who)
	c.ActorSystem.Root.Send(pid, env)
	if local || t == nil {
		return f.Result()
	}
	done := make(chan answer, 1)
	go func() { // ends when the future does: answered, dead letter or timeout
		m, err := f.Result()
		done <- answer{m, err}
	}()
	for {
		select {
		case a := <-done:
			return a.msg, a.err
		case <-t.changes():
			if t = r.topo.load(); !t.has(pid.Address) {
				return nil, errMemberLeft
			}
		}
	}
}

// resolve returns the PID of id's activation, from the cluster's cache or
// its identity lookup, waiting at most timeout, and only until a member
// leaves (departed closes): the lookup may be waiting on that member, and
// a new one uses the new membership. A lookup still running when resolve
// gives up finishes on its own goroutine (within the library's 5 s) and
// fills the cache; it only activates, it never carries msg, so an abandoned
// attempt cannot deliver a write late, after the caller moved on.
func resolve(c *cluster.Cluster, kind, id string, timeout time.Duration, departed <-chan struct{}) (*actor.PID, error) {
	if pid, ok := c.PidCache.Get(id, kind); ok && pid != nil {
		return pid, nil
	}
	found := make(chan *actor.PID, 1)
	go func() {
		pid := c.Get(id, kind)
		if pid != nil {
			c.PidCache.Set(id, kind, pid)
		}
		found <- pid
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case pid := <-found:
		if pid == nil {
			return nil, errs.Unavailable("%s %s: no member could activate it", kind, id)
		}
		return pid, nil
	case <-t.C:
		return nil, errs.Unavailable("%s %s: owner lookup did not answer within %v", kind, id, timeout)
	case <-departed:
		return nil, errs.Unavailable("%s %s: a member left during the owner lookup", kind, id)
	}
}
