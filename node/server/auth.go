package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/agentstate/agentstate/actors/audit"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
)

// auditRecorder is the part of the audit service the authenticator needs.
type auditRecorder interface {
	Record(ctx context.Context, req *auditv1.RecordRequest) (*auditv1.RecordResponse, error)
}

// authenticator checks the bearer token of every RPC (streamTap calls it
// on each stream's headers, before any of its request is read).
//
// Invariant: a request is handed to its handler only when its
// "authorization" metadata is exactly "Bearer <token>". The comparison is
// over SHA-256 digests in constant time, so neither the token nor its
// length leaks through timing.
type authenticator struct {
	want    [sha256.Size]byte
	auditor *failureAuditor
	m       *metrics
	// refusals writes the WARN line of each refusal, rate-limited: a
	// flood of unauthenticated calls must not flood the log (the metric
	// and the audit entries count them all).
	refusals *warnLimiter
}

func newAuthenticator(token string, auditor *failureAuditor, m *metrics, log *slog.Logger) *authenticator {
	return &authenticator{want: sha256.Sum256([]byte(token)), auditor: auditor, m: m,
		refusals: newWarnLimiter(log, "rejected unauthenticated request", warnWindow, warnBurst)}
}

// check returns nil when ctx carries the token, else an UNAUTHENTICATED
// error saying what was wrong (never what the token is).
func (a *authenticator) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	return a.checkMD(md)
}

// checkMD is check on a stream's header metadata (streamTap has it before
// the stream's context does).
func (a *authenticator) checkMD(md metadata.MD) error {
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return errs.Unauthenticated("missing bearer token: send metadata \"authorization: Bearer <token>\"")
	}
	if len(vals) > 1 {
		return errs.Unauthenticated("more than one authorization header")
	}
	scheme, tok, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return errs.Unauthenticated("authorization metadata is not of the form \"Bearer <token>\"")
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	if subtle.ConstantTimeCompare(got[:], a.want[:]) != 1 {
		return errs.Unauthenticated("wrong bearer token")
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
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
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
