package server

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"github.com/agentstate/agentstate/messages/principal"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// auditRecorder is the part of the audit service the authenticator needs.
type auditRecorder interface {
	Record(ctx context.Context, req *auditv1.RecordRequest) (*auditv1.RecordResponse, error)
}

// authenticator finds the principal of every RPC (streamTap calls it on
// each stream's headers, before any of its request is read).
//
// Invariant: a request is handed to its handler only with a principal:
// its "authorization" metadata is exactly "Bearer <token>" for a token of
// a known principal, or, without that metadata, its connection's verified
// client certificate names one (URI SAN, then DNS SAN). Tokens are looked
// up by their SHA-256 digest, so neither a token nor its length leaks
// through timing (the digest of a guess reveals nothing of the token's).
type authenticator struct {
	ids     atomic.Pointer[identities]
	auditor *failureAuditor
	m       *metrics
	// refusals writes the WARN line of each refusal, rate-limited: a
	// flood of unauthenticated calls must not flood the log (the metric
	// and the audit entries count them all).
	refusals *warnLimiter
}

func newAuthenticator(token string, auditor *failureAuditor, m *metrics, log *slog.Logger) *authenticator {
	return newAuthenticatorWith(tokenIdentities(token), auditor, m, log)
}

func newAuthenticatorWith(ids *identities, auditor *failureAuditor, m *metrics, log *slog.Logger) *authenticator {
	a := &authenticator{auditor: auditor, m: m,
		refusals: newWarnLimiter(log, "rejected unauthenticated request", warnWindow, warnBurst)}
	a.ids.Store(ids)
	return a
}

// swap makes ids the identities of every request from now on; requests
// admitted before keep the principal they had.
func (a *authenticator) swap(ids *identities) { a.ids.Store(ids) }

// check returns nil when ctx carries a known credential, else an
// UNAUTHENTICATED error saying what was wrong (never what the token is).
func (a *authenticator) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	_, err := a.principal(ctx, md)
	return err
}

// principal is the principal of a stream's header metadata (streamTap has
// it before the stream's context does) and its connection (ctx's peer).
func (a *authenticator) principal(ctx context.Context, md metadata.MD) (*Principal, error) {
	ids := a.ids.Load()
	vals := md.Get("authorization")
	if len(vals) == 0 {
		if p := certPrincipal(ctx, ids); p != nil {
			return p, nil
		}
		if ids.needsClientCerts {
			return nil, errs.Unauthenticated("no credential: send metadata \"authorization: Bearer <token>\" or connect with a client certificate of a known principal")
		}
		return nil, errs.Unauthenticated("missing bearer token: send metadata \"authorization: Bearer <token>\"")
	}
	if len(vals) > 1 {
		return nil, errs.Unauthenticated("more than one authorization header")
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return nil, errs.Unauthenticated("authorization metadata is not of the form \"Bearer <token>\"")
	}
	tok = strings.TrimSpace(tok)
	if p := ids.byToken[sha256.Sum256([]byte(tok))]; p != nil {
		return p, nil
	}
	if ids.jwt != nil && looksLikeJWT(tok) {
		return ids.jwt.principal(tok)
	}
	return nil, errs.Unauthenticated("wrong bearer token")
}

// certPrincipal is the principal the connection's client certificate
// names; the TLS handshake verified it against --tls-client-ca.
func certPrincipal(ctx context.Context, ids *identities) *Principal {
	if !ids.needsClientCerts {
		return nil
	}
	if c := peerCert(ctx); c != nil {
		return ids.byCert(c)
	}
	return nil
}

func (a *authenticator) reject(ctx context.Context, method string, err error) error {
	a.m.authFailures.Inc()
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	a.refusals.Warn("method", method, "peer", addr, "reason", errs.From(err).Msg)
	a.auditor.record(method, addr, errs.From(err).Msg)
	return err
}

// failureAuditor writes an auth_failure audit entry per rejected request,
// off the request's path: the rejection never waits for the writer.
//
// A flood of bad requests must not become a flood of audit writes (that
// would let anyone who can reach the port fill the disk), so entries are
// rate limited (burst entries, then one per interval) and at most
// maxInFlight are being handed over at once. Entries left out are counted
// and the count rides in the next entry written ("dropped_before").
type failureAuditor struct {
	rec         auditRecorder
	m           *metrics
	log         *slog.Logger
	interval    time.Duration
	burst       float64
	maxInFlight int
	timeout     time.Duration
	// withCtx marks the hand-over context (writer.NoWait: a full backlog is
	// an error, not a wait).
	withCtx func(context.Context) context.Context

	mu       sync.Mutex
	tokens   float64
	last     time.Time
	inFlight int
	dropped  int64
	closed   bool
	wg       sync.WaitGroup
}

func newFailureAuditor(rec auditRecorder, withCtx func(context.Context) context.Context, m *metrics, log *slog.Logger) *failureAuditor {
	return &failureAuditor{
		rec: rec, m: m, log: log, withCtx: withCtx,
		interval: 100 * time.Millisecond, burst: 20, maxInFlight: 8, timeout: 5 * time.Second,
		tokens: 20,
	}
}

// record hands an entry to the audit service on its own goroutine, unless
// the rate limit or the in-flight bound says to count it as dropped.
func (f *failureAuditor) record(method, peerAddr, reason string) {
	f.mu.Lock()
	now := time.Now()
	if !f.last.IsZero() {
		f.tokens = min(f.burst, f.tokens+now.Sub(f.last).Seconds()/f.interval.Seconds())
	}
	f.last = now
	if f.closed || f.tokens < 1 || f.inFlight >= f.maxInFlight {
		f.dropped++
		f.mu.Unlock()
		f.m.authAuditDropped.Inc()
		return
	}
	f.tokens--
	f.inFlight++
	dropped := f.dropped
	f.dropped = 0
	f.wg.Add(1)
	f.mu.Unlock()

	details := map[string]any{"method": method, "peer": peerAddr, "reason": reason}
	if dropped > 0 {
		details["dropped_before"] = dropped
	}
	b, _ := json.Marshal(details)
	req := &auditv1.RecordRequest{
		EventType: audit.EventAuthFailure, ActorName: "node", UserIdentity: peerAddr, DetailsJson: string(b),
	}
	go func() {
		defer f.done()
		// The node records the refusal: no principal authenticated.
		ctx, cancel := context.WithTimeout(principal.With(context.Background(), principal.Node), f.timeout)
		defer cancel()
		if f.withCtx != nil {
			ctx = f.withCtx(ctx)
		}
		if _, err := f.rec.Record(ctx, req); err != nil {
			f.mu.Lock()
			f.dropped += 1 + dropped
			f.mu.Unlock()
			f.m.authAuditDropped.Inc()
			f.log.Warn("auth_failure audit entry not recorded", "err", err)
		}
	}()
}

func (f *failureAuditor) done() {
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
	f.wg.Done()
}

// close stops new entries and waits for those being handed over, so that
// the writer, stopped next, drains and flushes every accepted one.
func (f *failureAuditor) close() {
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	f.wg.Wait()
}
