package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/agentstate/agentstate/actors/audit"
	"github.com/agentstate/agentstate/actors/writer"
	auditv1 "github.com/agentstate/agentstate/messages/agentstate/audit/v1"
	"github.com/agentstate/agentstate/messages/errs"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"
)

// fakeRecorder collects auth_failure records.
type fakeRecorder struct {
	mu     sync.Mutex
	reqs   []*auditv1.RecordRequest
	noWait []bool
	fail   error
}

func (f *fakeRecorder) Record(ctx context.Context, req *auditv1.RecordRequest) (*auditv1.RecordResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, req)
	f.noWait = append(f.noWait, !writer.Waits(ctx))
	return &auditv1.RecordResponse{}, f.fail
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func withAuth(v ...string) context.Context {
	md := metadata.MD{}
	for _, s := range v {
		md.Append("authorization", s)
	}
	return metadata.NewIncomingContext(context.Background(), md)
}

func TestAuthenticatorCheck(t *testing.T) {
	a := newAuthenticator("s3cret", nil, newMetrics(), quietLog())
	cases := []struct {
		name string
		ctx  context.Context
		ok   bool
	}{
		{"right token", withAuth("Bearer s3cret"), true},
		{"scheme is case-insensitive", withAuth("bearer s3cret"), true},
		{"no metadata", context.Background(), false},
		{"no header", withAuth(), false},
		{"wrong token", withAuth("Bearer s3cre"), false},
		{"token as prefix", withAuth("Bearer s3cretX"), false},
		{"no scheme", withAuth("s3cret"), false},
		{"basic scheme", withAuth("Basic s3cret"), false},
		{"two headers", withAuth("Bearer s3cret", "Bearer s3cret"), false},
	}
	for _, tc := range cases {
		err := a.check(tc.ctx)
		if tc.ok != (err == nil) {
			t.Errorf("%s: check = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, errs.ErrUnauthenticated) {
			t.Errorf("%s: %v is not UNAUTHENTICATED", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error leaks the token: %v", tc.name, err)
		}
	}
}

// TestTapRejectsAndAudits: a stream with a bad token is refused on its
// headers, UNAUTHENTICATED, yields one auth_failure record handed over
// without waiting on the backlog, and takes no stream slot; with the
// token it is admitted.
func TestTapRejectsAndAudits(t *testing.T) {
	rec := &fakeRecorder{}
	m := newMetrics()
	fa := newFailureAuditor(rec, writer.NoWait, m, quietLog())
	tp := newStreamTap(newAuthenticator("s3cret", fa, m, quietLog()), 0, m, quietLog())
	const method = "/agentstate.session.v1.SessionService/Get"
	tp.known[method] = true
	header := func(v string) *tap.Info {
		return &tap.Info{FullMethodName: method, Header: metadata.Pairs("authorization", v)}
	}

	_, err := tp.handle(context.Background(), header("Bearer nope"))
	if status.Code(err) != codes.Unauthenticated || tp.inUse() != 0 {
		t.Fatalf("err=%v, %d slots in use; want UNAUTHENTICATED and none", err, tp.inUse())
	}
	fa.close() // waits for the hand-over
	if len(rec.reqs) != 1 {
		t.Fatalf("%d audit records, want 1", len(rec.reqs))
	}
	r := rec.reqs[0]
	if r.GetEventType() != audit.EventAuthFailure || !strings.Contains(r.GetDetailsJson(), "SessionService/Get") ||
		!strings.Contains(r.GetDetailsJson(), "wrong bearer token") || !rec.noWait[0] {
		t.Fatalf("record %v (noWait %v); want auth_failure naming the method and reason, marked NoWait", r, rec.noWait[0])
	}
	if got := counterValue(t, m.authFailures); got != 1 {
		t.Fatalf("auth failures = %v, want 1", got)
	}
	if got := counterValue(t, m.requests.WithLabelValues(method, codes.Unauthenticated.String())); got != 1 {
		t.Fatalf("requests{%s, Unauthenticated} = %v, want 1 (as the interceptors counted refusals)", method, got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	if _, err := tp.handle(ctx, header("Bearer s3cret")); err != nil || tp.inUse() != 1 {
		t.Fatalf("with the right token: err=%v, %d slots in use; want admitted, 1", err, tp.inUse())
	}
	cancel()
}

// TestFailureAuditorRateLimit: past the burst, failures are counted, not
// written, and the count rides in the next entry that is written.
func TestFailureAuditorRateLimit(t *testing.T) {
	rec := &fakeRecorder{}
	m := newMetrics()
	fa := newFailureAuditor(rec, nil, m, quietLog())
	fa.maxInFlight = 1000
	const n = 50
	for range n {
		fa.record("/m", "peer", "wrong bearer token")
	}
	fa.wg.Wait()
	written := len(rec.reqs)
	if written < int(fa.burst) || written > int(fa.burst)+2 {
		t.Fatalf("%d of %d failures written; want about the burst (%v)", written, n, fa.burst)
	}
	dropped := counterValue(t, m.authAuditDropped)
	if int(dropped) != n-written {
		t.Fatalf("dropped counter = %v, want %d", dropped, n-written)
	}
	// Refill one token by pretending time passed, then the next entry
	// carries the count.
	fa.mu.Lock()
	fa.tokens = 1
	fa.last = fa.last.Add(-fa.interval)
	fa.mu.Unlock()
	fa.record("/m", "peer", "wrong bearer token")
	fa.close()
	last := rec.reqs[len(rec.reqs)-1].GetDetailsJson()
	if !strings.Contains(last, `"dropped_before":`) {
		t.Fatalf("next entry %s does not carry the dropped count", last)
	}
	// After close nothing more is written.
	before := len(rec.reqs)
	fa.record("/m", "peer", "x")
	if len(rec.reqs) != before {
		t.Fatal("record after close wrote an entry")
	}
}

func TestFailureAuditorRecordErrorCountsAsDropped(t *testing.T) {
	rec := &fakeRecorder{fail: errs.ResourceExhausted("backlog full")}
	m := newMetrics()
	fa := newFailureAuditor(rec, writer.NoWait, m, quietLog())
	fa.record("/m", "peer", "x")
	fa.close()
	if got := counterValue(t, m.authAuditDropped); got != 1 {
		t.Fatalf("dropped = %v, want 1", got)
	}
	if fa.dropped != 1 {
		t.Fatalf("carried count = %d, want 1", fa.dropped)
	}
}
