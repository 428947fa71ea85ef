package checker

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	planv1 "github.com/agentstate/agentstate/messages/agentstate/plan/v1"
	sessionv1 "github.com/agentstate/agentstate/messages/agentstate/session/v1"
	"github.com/agentstate/agentstate/messages/ids"
	nodeclient "github.com/agentstate/agentstate/node/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// LoadConfig sizes the load. Zero fields take the defaults in brackets.
type LoadConfig struct {
	Sessions int // sessions created up front [16]
	Clients  int // concurrent clients, each sending one request at a time [8]
	Plans    int // plans the clients record errors for [4]
	MaxTurn  int // messages per Append: 1..MaxTurn [3]
	// Every n-th operation of a client is a plan error, a synchronous
	// audit entry, or a replay of a turn it saw acknowledged; the rest are
	// appends. Negative means never. [7, 11, 13]
	PlanErrorEvery, AuditEvery, ReplayEvery int
	// Every n-th operation of a client truncates a session through the
	// highest sequence the client saw acknowledged in it. Negative means
	// never. [17]
	TruncateEvery int
	// Every n-th operation of a client appends a batch of keyed messages
	// (keyed.go) to one of KeyedSessions sessions of their own. Negative
	// means never. [5, 2]
	KeyedEvery, KeyedSessions int
	// Every n-th operation of a client replaces the newest messages of a
	// session of its own (suffix.go). Negative means never. [19]
	SuffixEvery int
	// Every n-th client (client ids 0, n, 2n, ...) appends through the
	// AppendBatches stream of its connection (nodeclient.BatchClient,
	// shared with the other such clients), the others with unary Append.
	// Negative means none. [2]
	BatchEvery int
	// Namespace holds the load's sessions [checker]; its audit entries
	// then name one of them (so they belong to it). Set for a tenant's
	// load (Tenant).
	Namespace string
	// RPCTimeout bounds one attempt; an attempt that times out is retried
	// like any other unavailability. [15s]
	RPCTimeout time.Duration
	Seed       uint64
	// OnAppend, when set, is called after every Append attempt (replays
	// included) with the index of the connection it went to (see
	// NewClusterLoad), its session and its outcome (nil: acknowledged),
	// from the client's goroutine; it must be safe for concurrent use.
	// Failover measurements hang off it.
	OnAppend func(conn int, session string, err error)
}

func (c LoadConfig) withDefaults() LoadConfig {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Sessions, 16)
	def(&c.Clients, 8)
	def(&c.Plans, 4)
	def(&c.MaxTurn, 3)
	def(&c.PlanErrorEvery, 7)
	def(&c.AuditEvery, 11)
	def(&c.ReplayEvery, 13)
	def(&c.TruncateEvery, 17)
	def(&c.BatchEvery, 2)
	def(&c.KeyedEvery, 5)
	def(&c.KeyedSessions, 2)
	def(&c.SuffixEvery, 19)
	if c.Namespace == "" {
		c.Namespace = "checker"
	}
	if c.RPCTimeout == 0 {
		c.RPCTimeout = 15 * time.Second
	}
	return c
}

// Load drives a node with sessions, plan errors and audit entries, and
// records every acknowledgement in a Ledger. Each client retries a request
// that failed with a retriable code — with the same message ids — until it
// is acknowledged, so when Run returns every request sent was answered OK,
// refused for good (Rejected), or — only a request without a client id —
// answered "may have been applied" (MaybeApplied).
type Load struct {
	cfg    LoadConfig
	tenant bool // cfg.Namespace was given: a tenant's load
	// clientBase numbers this load's clients after other loads' of the
	// run (their audit entries name them: each request's content is
	// unique in the run).
	clientBase int
	ledger     *Ledger
	targets    []target // one per connection; read-only

	sessionIDs []string // set by Setup, read-only after
	keyedIDs   []string // the keyed batches' sessions (keyed.go), likewise
	suffixIDs  []string // the replacements' sessions, one per client (suffix.go), likewise
	planIDs    []string

	acked        atomic.Int64 // operations acknowledged
	batchAcked   atomic.Int64 // of which appends over AppendBatches
	maybeApplied atomic.Int64 // non-idempotent operations given up as "may have been applied"
	attempts     atomic.Int64
	mu           sync.Mutex
	// replays: replays hold it shared, truncations exclusively (state.go).
	replays  sync.RWMutex
	failures map[codes.Code]int64
	// audited are the event ids of the audit entries acknowledged.
	audited  []string
	lastErr  map[codes.Code]string // the latest failure message per code
	rejected []string
}

// target is the clients of one connection (one node).
type target struct {
	sessions sessionv1.SessionServiceClient
	plans    planv1.PlanServiceClient
	audit    auditv1.AuditServiceClient
	// batch appends over the connection's AppendBatches stream.
	batch *nodeclient.BatchClient
}

// NewLoad returns a load for the node at conn that records into l.
func NewLoad(conn grpc.ClientConnInterface, l *Ledger, cfg LoadConfig) *Load {
	return NewClusterLoad([]grpc.ClientConnInterface{conn}, l, cfg)
}

// NewClusterLoad returns a load spread over the nodes at conns (members of
// one cluster, sharing one store): client i starts on conns[i%len(conns)],
// and after a failed attempt retries — with the same request — on the next
// connection, so a client of a killed node moves to a live one. With more
// than one connection an attempt does not wait for a connection to become
// ready (it fails fast and moves on). conns must not be empty.
func NewClusterLoad(conns []grpc.ClientConnInterface, l *Ledger, cfg LoadConfig) *Load {
	tenant := cfg.Namespace != ""
	cfg = cfg.withDefaults()
	ld := &Load{
		cfg:      cfg,
		tenant:   tenant,
		ledger:   l,
		failures: make(map[codes.Code]int64),
		lastErr:  make(map[codes.Code]string),
	}
	for _, conn := range conns {
		sessions := sessionv1.NewSessionServiceClient(conn)
		ld.targets = append(ld.targets, target{
			sessions: sessions,
			plans:    planv1.NewPlanServiceClient(conn),
			audit:    auditv1.NewAuditServiceClient(conn),
			batch:    nodeclient.NewBatchClient(sessions, grpc.WaitForReady(len(conns) == 1)),
		})
	}
	for range cfg.Plans {
		ld.planIDs = append(ld.planIDs, ids.New())
	}
	return ld
}

// Run starts the clients and returns when stop is closed and each client
// has finished its current request (retrying it until answered), or when
// ctx ends (with ctx's error). Call Setup first.
func (ld *Load) Run(ctx context.Context, stop <-chan struct{}) error {
	if len(ld.sessionIDs) == 0 {
		return errors.New("checker: Load.Run before Setup")
	}
	errc := make(chan error, ld.cfg.Clients)
	for i := range ld.cfg.Clients {
		go func() { errc <- ld.client(ctx, i, stop) }()
	}
	var err error
	for range ld.cfg.Clients {
		err = errors.Join(err, <-errc)
	}
	for _, t := range ld.targets {
		t.batch.Close()
	}
	return err
}

// auditIDs are the event ids of the audit entries the load saw
// acknowledged.
func (ld *Load) auditIDs() []string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return append([]string(nil), ld.audited...)
}

// Acked is the number of operations acknowledged so far.
func (ld *Load) Acked() int64 { return ld.acked.Load() }

// WaitAcked polls until at least n operations were acknowledged or ctx ends.
func (ld *Load) WaitAcked(ctx context.Context, n int64) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for ld.Acked() < n {
		select {
		case <-ctx.Done():
			return fmt.Errorf("checker: %d of %d operations acknowledged: %w", ld.Acked(), n, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Failures returns how many attempts failed, by gRPC code.
func (ld *Load) Failures() map[codes.Code]int64 {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	out := make(map[codes.Code]int64, len(ld.failures))
	for c, n := range ld.failures {
		out[c] = n
	}
	return out
}

// LastFailures returns the latest failure message per code.
func (ld *Load) LastFailures() map[codes.Code]string {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	out := make(map[codes.Code]string, len(ld.lastErr))
	for c, m := range ld.lastErr {
		out[c] = m
	}
	return out
}

// Fill adds the load's figures to r: attempts, failed attempts, and the
// requests refused for good (which count as violations).
func (ld *Load) Fill(r *Report) {
	r.Attempts = ld.attempts.Load()
	r.BatchAcked = ld.batchAcked.Load()
	r.MaybeApplied = ld.maybeApplied.Load()
	ld.mu.Lock()
	defer ld.mu.Unlock()
	for _, n := range ld.failures {
		r.Failed += n
	}
	for _, p := range ld.rejected {
		r.problem(&r.Rejected, "%s", p)
	}
}

// FormatFailures prints failure counts by code, e.g. "Unavailable=12".
func FormatFailures(m map[codes.Code]int64) string {
	var parts []string
	for c := range codes.Code(17) {
		if m[c] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", c, m[c]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// retriable codes are those a crash, a restart or a full database cause;
// a retry with the same request is correct for each, if the request is
// idempotent. DEADLINE_EXCEEDED is OUTCOME_UNKNOWN (the node's, or the
// client's for a connection cut under a request in flight — see
// nodeclient.OutcomeOptions, which the load's connections are dialed
// with — or the client's own deadline): the request may have been applied,
// so only an idempotent request (one with client ids) is retried after it.
// UNAVAILABLE promises nothing was stored. Every request of the load
// carries client ids; the ledger still counts each attempt (AppendSent,
// PlanErrorSent, AuditSent).
func retriable(c codes.Code, idempotent bool) bool {
	switch c {
	case codes.Unavailable, codes.ResourceExhausted, codes.Canceled, codes.Aborted:
		return true
	case codes.DeadlineExceeded:
		return idempotent
	}
	return false
}

// errRejected marks a request refused with a code retrying cannot cure.
var errRejected = errors.New("rejected")

// errMaybeApplied marks a request without client ids whose outcome is
// unknown: it is neither acknowledged nor retried (a retry could store it
// twice), and the ledger's attempts already allow for it being stored.
var errMaybeApplied = errors.New("may have been applied")

// call runs f on connection *at until it succeeds, fails with a code that
// is not retriable (errRejected, recorded), fails with an unknown outcome
// and is not idempotent (errMaybeApplied, counted), or ctx ends. After a failed
// attempt *at moves to the next connection, so a caller of a dead node tries
// the others. ready is the wait-for-ready option f must pass: waiting with
// one node (it comes back), failing fast with several (another may be up).
// Backoff between attempts keeps a down node from being hammered; it is
// not synchronization.
//
// failed, when not nil, receives the code of every failed attempt.
func (ld *Load) call(ctx context.Context, what string, at *int, idempotent bool, failed *[]codes.Code,
	f func(ctx context.Context, conn int, ready grpc.CallOption) error) error {
	backoff := 5 * time.Millisecond
	ready := grpc.WaitForReady(len(ld.targets) == 1)
	for {
		actx, cancel := context.WithTimeout(ctx, ld.cfg.RPCTimeout)
		err := f(actx, *at%len(ld.targets), ready)
		cancel()
		ld.attempts.Add(1)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		code := status.Code(err)
		if failed != nil {
			*failed = append(*failed, code)
		}
		ld.mu.Lock()
		ld.failures[code]++
		ld.lastErr[code] = status.Convert(err).Message()
		if code == codes.DeadlineExceeded && !idempotent {
			ld.mu.Unlock()
			ld.maybeApplied.Add(1)
			return fmt.Errorf("%w: %s: %v", errMaybeApplied, what, err)
		}
		if !retriable(code, idempotent) {
			ld.rejected = append(ld.rejected, fmt.Sprintf("%s: %v", what, err))
			ld.mu.Unlock()
			return fmt.Errorf("%w: %s: %v", errRejected, what, err)
		}
		ld.mu.Unlock()
		*at = (*at + 1) % len(ld.targets)
		t := time.NewTimer(backoff/2 + rand.N(backoff))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// client is one sequential caller: it sends a request, waits for its
// answer (retrying), records it, and only then sends the next.
func (ld *Load) client(ctx context.Context, i int, stop <-chan struct{}) error {
	c := &client{ld: ld, id: ld.clientBase + i, at: i % len(ld.targets), rng: rand.New(rand.NewPCG(ld.cfg.Seed, uint64(i))),
		batch: ld.cfg.BatchEvery > 0 && i%ld.cfg.BatchEvery == 0}
	for n := 1; ; n++ {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		var err error
		every := func(k int) bool { return k > 0 && n%k == 0 }
		switch {
		case every(ld.cfg.AuditEvery):
			err = c.recordAudit(ctx, n)
		case every(ld.cfg.PlanErrorEvery):
			err = c.recordPlanError(ctx, n)
		case every(ld.cfg.ReplayEvery) && len(c.done) > 0:
			err = c.replay(ctx, n)
		case every(ld.cfg.TruncateEvery):
			err = c.truncate(ctx, n)
		case every(ld.cfg.KeyedEvery) && len(ld.keyedIDs) > 0:
			err = c.keyed(ctx, n)
		case every(ld.cfg.SuffixEvery) && len(ld.suffixIDs) > 0:
			err = c.replaceSuffix(ctx, n)
		default:
			err = c.append(ctx, n)
		}
		if err != nil && !errors.Is(err, errRejected) && !errors.Is(err, errMaybeApplied) {
			return err
		}
		if err == nil {
			ld.acked.Add(1)
		}
	}
}
