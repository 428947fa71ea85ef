package client

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"

	commonv1 "github.com/agentstate/agentstate/messages/agentstate/common/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Bounds of an OwnerRouter's memory.
const (
	// MaxRoutes is the number of sessions and plans whose owner a router
	// remembers; a new one beyond it replaces an arbitrary one.
	MaxRoutes = 1 << 16
	// MaxOwners is the number of members a router keeps a connection to.
	// Beyond it, one without calls in flight is closed to make room (the
	// routes to it are dropped); while all have calls in flight, a hint
	// naming another member is ignored: its requests go on through the
	// connection's own member, which forwards them.
	MaxOwners = 16
)

// OwnerRouter sends each unary request of the session and plan services
// that names a session (session_id) or a plan (namespace and plan_id) to
// the cluster member that owns it, once a member has named the owner in
// the sessionv1.OwnerHeader of an answer; until then, and for every other
// request, the connection's own member. A member that does not own a
// session forwards the request to the owner, so routing only saves the
// members that hop; a single node never sets the header, and the router
// then changes nothing.
//
// A routed request that fails UNAVAILABLE with the promise that nothing
// was stored (agentstate's own code in the status: the member's answer, or
// OutcomeOptions' verdict that the request was not sent), or a read that
// fails UNAVAILABLE, was not applied: the router forgets the route and
// sends it once more through the connection's own member. Any other
// outcome is the caller's, as on the connection.
//
// It is installed on one connection (DialOption) and dials the owners
// itself, lazily, with the options it was made with: the connection's
// own, so that credentials and TLS are the same. An explicit TLS server
// name then applies to every member. Its connections close with Close, or
// when the connection it serves closes.
type OwnerRouter struct {
	opts      []grpc.DialOption
	maxRoutes int
	maxOwners int

	mu       sync.RWMutex
	routes   map[routeKey]*owner
	owners   map[string]*owner
	watching bool // a goroutine closes the router when its connection closes
	closed   bool
	done     chan struct{} // closed by Close

	routed, hinted, fellBack atomic.Int64
}

// routeKey is what a request names: a session, or a plan of a namespace.
type routeKey struct {
	plan   bool
	ns, id string
}

// owner is a member the router sends requests to.
type owner struct {
	addr     string
	conn     *grpc.ClientConn
	inflight atomic.Int32 // routed calls on conn; one with none may be closed
	gone     bool         // closed: routes to it are void (under the router's mu)
}

// RouteStats count a router's requests.
type RouteStats struct {
	// Routed requests were sent to an owner instead of the connection's
	// member; Hinted answers named an owner; FellBack requests failed
	// UNAVAILABLE at the owner and were sent again through the connection.
	Routed, Hinted, FellBack int64
}

// NewOwnerRouter returns a router that dials owners with opts.
func NewOwnerRouter(opts ...grpc.DialOption) *OwnerRouter {
	return &OwnerRouter{opts: opts, maxRoutes: MaxRoutes, maxOwners: MaxOwners,
		routes: make(map[routeKey]*owner), owners: make(map[string]*owner), done: make(chan struct{})}
}

// DialOption installs r on a connection. It must come before the
// connection's other interceptors, so that they judge each attempt (the
// routed one on the owner's connection, which has them too) and r sees
// their verdicts.
func (r *OwnerRouter) DialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(r.intercept)
}

// Stats returns the counts so far.
func (r *OwnerRouter) Stats() RouteStats {
	return RouteStats{Routed: r.routed.Load(), Hinted: r.hinted.Load(), FellBack: r.fellBack.Load()}
}

// Close closes the connections to owners; calls on them fail, and later
// requests go through the connection's own member.
func (r *OwnerRouter) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	owners := r.owners
	r.owners, r.routes = nil, nil
	for _, o := range owners {
		o.gone = true
	}
	close(r.done)
	r.mu.Unlock()
	for _, o := range owners {
		o.conn.Close()
	}
	return nil
}

// routedServices are the services whose requests are served by the owner
// of the session or plan they name.
var routedServices = []string{
	"/" + sessionv1.SessionService_ServiceDesc.ServiceName + "/",
	"/" + planv1.PlanService_ServiceDesc.ServiceName + "/",
}

// keyOf is the session or plan a request of method names.
func keyOf(method string, req any) (routeKey, bool) {
	if !strings.HasPrefix(method, routedServices[0]) && !strings.HasPrefix(method, routedServices[1]) {
		return routeKey{}, false
	}
	if s, ok := req.(interface{ GetSessionId() string }); ok && s.GetSessionId() != "" {
		return routeKey{id: s.GetSessionId()}, true
	}
	p, ok := req.(interface{ GetPlanId() string })
	if !ok || p.GetPlanId() == "" {
		return routeKey{}, false
	}
	k := routeKey{plan: true, id: p.GetPlanId()}
	if n, ok := req.(interface{ GetNamespace() string }); ok {
		k.ns = n.GetNamespace()
	}
	return k, true
}

func (r *OwnerRouter) intercept(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
	invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	key, ok := keyOf(method, req)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var md metadata.MD
	// A copy: appending to the caller's slice could write into its array.
	withHeader := append(opts[:len(opts):len(opts)], grpc.Header(&md))
	if o := r.lookup(key); o != nil {
		r.routed.Add(1)
		err := o.conn.Invoke(ctx, method, req, reply, withHeader...)
		o.inflight.Add(-1)
		if err == nil || !nothingStored(method, err) || ctx.Err() != nil {
			r.learn(cc, key, md)
			return err
		}
		r.forget(key, o)
		r.fellBack.Add(1)
		md = nil
	}
	err := invoker(ctx, method, req, reply, cc, withHeader...)
	r.learn(cc, key, md)
	return err
}

// lookup returns the owner routed to for key, counting a call on it, or
// nil.
func (r *OwnerRouter) lookup(key routeKey) *owner {
	r.mu.RLock()
	defer r.mu.RUnlock()
	o := r.routes[key]
	if o == nil || o.gone {
		return nil
	}
	// Under the read lock: an eviction, under the write lock, sees it.
	o.inflight.Add(1)
	return o
}

// forget drops key's route if it still leads to o.
func (r *OwnerRouter) forget(key routeKey, o *owner) {
	r.mu.Lock()
	if r.routes[key] == o {
		delete(r.routes, key)
	}
	r.mu.Unlock()
}

// learn routes key to the owner an answer's header names, if it names
// one; an answer without it leaves the route as it is. A hint naming cc's
// own target routes key through cc again.
func (r *OwnerRouter) learn(cc *grpc.ClientConn, key routeKey, md metadata.MD) {
	v := md.Get(sessionv1.OwnerHeader)
	if len(v) == 0 {
		return
	}
	r.hinted.Add(1)
	addr := v[0]
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return // not host:port: nothing to dial
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	if addr == cc.Target() {
		delete(r.routes, key)
		r.mu.Unlock()
		return
	}
	if cur := r.routes[key]; cur != nil && cur.addr == addr && !cur.gone {
		r.mu.Unlock()
		return
	}
	o, evicted := r.ownerLocked(addr)
	if o != nil {
		if _, known := r.routes[key]; !known && len(r.routes) >= r.maxRoutes {
			for k := range r.routes { // an arbitrary one: the map's random start
				delete(r.routes, k)
				break
			}
		}
		r.routes[key] = o
	}
	if o != nil && !r.watching {
		r.watching = true
		go r.closeWith(cc)
	}
	r.mu.Unlock()
	if evicted != nil {
		evicted.Close()
	}
}

// ownerLocked returns the owner at addr, dialling it if it is new. When
// MaxOwners are kept, one without calls in flight makes room (its
// connection is returned, to be closed outside the lock); with none, it
// returns nil.
func (r *OwnerRouter) ownerLocked(addr string) (*owner, *grpc.ClientConn) {
	if o := r.owners[addr]; o != nil {
		return o, nil
	}
	var evicted *grpc.ClientConn
	if len(r.owners) >= r.maxOwners {
		for a, o := range r.owners {
			if o.inflight.Load() == 0 {
				o.gone = true
				delete(r.owners, a)
				evicted = o.conn
				break
			}
		}
		if evicted == nil {
			return nil, nil
		}
	}
	// grpc.NewClient connects on the first call, so this does no I/O.
	conn, err := grpc.NewClient(addr, r.opts...)
	if err != nil {
		return nil, evicted
	}
	o := &owner{addr: addr, conn: conn}
	r.owners[addr] = o
	return o, evicted
}

// closeWith closes r once cc is closed.
func (r *OwnerRouter) closeWith(cc *grpc.ClientConn) {
	for s := cc.GetState(); s != connectivity.Shutdown; s = cc.GetState() {
		cc.WaitForStateChange(context.Background(), s)
	}
	r.Close()
}

// nothingStored reports whether err, a call's failure, promises the
// request was not applied: UNAVAILABLE carrying agentstate's own code
// (the node answered it, or OutcomeOptions found it was not sent; see
// errs.Error: nothing stored unless OUTCOME_UNKNOWN), or any UNAVAILABLE
// of a method that changes nothing.
func nothingStored(method string, err error) bool {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable {
		return false
	}
	if readOnly[method] {
		return true
	}
	for _, d := range st.Details() {
		if e, ok := d.(*commonv1.Error); ok && e.GetCode() == errs.UnavailableCode {
			return true
		}
	}
	return false
}
